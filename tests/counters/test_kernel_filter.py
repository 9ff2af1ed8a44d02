"""--kernel's matcher (gpuprofile/counters/kernel_filter.py) on kernel names as CUPTI reports
them: Hopper cuBLAS (nvjet_*), CUTLASS templates, PyTorch's elementwise and reduction kernels,
Triton, and gpuprofile's own attention kernels."""

import pytest

from gpuprofile.counters.kernel_filter import (
    compile_pattern,
    match,
    names_of,
    no_match_message,
)

NVJET = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
NVJET_SPLITK = "nvjet_tst_192x192_64x3_2x1_v_bz_splitK_TNT"
CUTLASS = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, "
           "int, int>, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::"
           "MainloopSm90TmaGmmaWarpSpecialized<4, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1>>, "
           "cutlass::gemm::KernelTmaWarpSpecializedCooperative>, cutlass::bfloat16_t>, void>>"
           "(cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, void>::Params)")
XMMA = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
TORCH_ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::"
                     "CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>>(int, at::native::"
                     "CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
TORCH_REDUCE = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
                "func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()"
                "(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>>"
                "(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::"
                "sum_functor<float, float, float>::operator()(at::TensorIterator&)::"
                "{lambda(float, float)#1}>, unsigned int, float, 4, 4>)")
FLASH = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"
TRITON = "triton_poi_fused_add_mul_0"
OURS = "gp_attention_flash_wgmma_kernel(gp_attention_params)"
ALL = [NVJET, CUTLASS, XMMA, TORCH_ELEMENTWISE, TORCH_REDUCE, FLASH, TRITON, OURS, NVJET_SPLITK]


def test_names_of_gives_the_full_the_qualified_and_the_bare_function_name():
    assert names_of(CUTLASS)[1:] == ("cutlass::device_kernel<…>", "device_kernel")
    assert names_of(TORCH_ELEMENTWISE)[1:] == ("at::native::vectorized_elementwise_kernel<…>",
                                               "vectorized_elementwise_kernel")
    assert names_of(NVJET) == (NVJET, NVJET, NVJET)
    assert names_of(OURS)[1:] == ("gp_attention_flash_wgmma_kernel",) * 2


@pytest.mark.parametrize("pattern, expected", [
    ("nvjet", [NVJET, NVJET_SPLITK]),                     # text: Hopper cuBLAS
    ("regex:^nvjet_", [NVJET, NVJET_SPLITK]),             # ncu's prefix, anchored on the name
    ("^nvjet_.*splitK", [NVJET_SPLITK]),
    ("gemm", [CUTLASS, XMMA]),                            # in the full name only (templates, SASS)
    ("^device_kernel$", [CUTLASS]),                       # the bare name, as ncu -k device_kernel
    ("^cutlass::device_kernel", [CUTLASS]),               # the qualified name, anchored
    ("MainloopSm90TmaGmmaWarpSpecialized<4", [CUTLASS]),  # a template argument (regex-safe text)
    ("elementwise|reduce_kernel", [TORCH_ELEMENTWISE, TORCH_REDUCE]),
    ("reduce_kernel$", [TORCH_REDUCE]),                   # end of the short name, not the full one
    ("operator()", [TORCH_REDUCE]),                       # text where the regex means otherwise
    ("{lambda(float, float)#1}", [TORCH_REDUCE]),         # not a valid regex: plain text
    ("flash", [FLASH, OURS]),
    ("^flash_fwd_kernel$", [FLASH]),
    ("triton_poi", [TRITON]),
    ("bfloat16_t", [CUTLASS, FLASH]),
    ("^gemm$", []),
])
def test_real_world_names(pattern, expected):
    assert [ALL[i] for i in match(pattern, ALL)] == expected


def test_bad_patterns():
    with pytest.raises(ValueError, match="not a regular expression"):
        compile_pattern("regex:(")
    with pytest.raises(ValueError, match="empty"):
        compile_pattern("regex:")
    with pytest.raises(TypeError, match="must be a str"):
        compile_pattern(3)
    assert compile_pattern("(")("f(int)") and not compile_pattern("(")("f")  # text fallback


def test_no_match_lists_the_kernels_there_were():
    names = [NVJET, TORCH_ELEMENTWISE, NVJET, TRITON]
    message = no_match_message("gemm", names)
    assert message.splitlines() == [
        "--kernel 'gemm' matched none of the 4 kernels; there were (3 distinct names):",
        f"  {NVJET}",
        "  at::native::vectorized_elementwise_kernel<…>",
        f"  {TRITON}",
        "(the pattern is searched as a regular expression and as text in the full and the short "
        "names)",
    ]
    assert no_match_message("x", []) == "--kernel 'x': no kernel ran"
    many = no_match_message("x", [f"k{i}" for i in range(45)]).splitlines()
    assert many[-2] == "  ... and 5 more" and len(many) == 43
