/* A minimal NVTX tool, for tests and benchmarks on machines without Nsight: load it with
 *     cc -shared -fPIC -I$CUDA_HOME/include -o nvtx_record_tool.so tools/nvtx_record_tool.c
 *     NVTX_INJECTION64_PATH=$PWD/nvtx_record_tool.so python ...
 * and every NVTX call of the process (gpuprofile's and the nvtx package's alike) reaches it, as
 * it would reach Nsight Systems. With GP_NVTX_RECORD=<file> it writes one line per call there
 * (what tests/regions/test_nvtx_tool.py compares); without, it only keeps the range depth and
 * ids, so a benchmark measures what a caller pays to reach an attached tool, not a tool's work.
 * Single-threaded by design: the tests that use it push from one thread. */
#define NVTX_NO_IMPL /* the types only: this library implements the calls, not the API */
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static int depth;
static nvtxRangeId_t next_id = 100;

/* A domain handle is the domain's name, copied (NVTX treats handles as opaque). */
static const char *
domain_name(nvtxDomainHandle_t domain)
{
    return domain ? (const char *)domain : "-";
}

static void
record(const char *call, nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
    if (out == NULL)
        return;
    fprintf(out, "%s %s %s", call, domain_name(domain), a->message.ascii);
    if (a->colorType == NVTX_COLOR_ARGB)
        fprintf(out, " color=%08x", (unsigned)a->color);
    fprintf(out, " category=%u", (unsigned)a->category);
    if (a->payloadType == NVTX_PAYLOAD_TYPE_INT64)
        fprintf(out, " payload=%lld", (long long)a->payload.llValue);
    else if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64)
        fprintf(out, " payload=%llu", (unsigned long long)a->payload.ullValue);
    else if (a->payloadType == NVTX_PAYLOAD_TYPE_DOUBLE)
        fprintf(out, " payload=%g", a->payload.dValue);
    fputc('\n', out);
}

static int
domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
    record("push", domain, a);
    return depth++;
}

static int
domain_pop(nvtxDomainHandle_t domain)
{
    if (out != NULL)
        fprintf(out, "pop %s\n", domain_name(domain));
    return depth > 0 ? --depth : -1;
}

static nvtxRangeId_t
domain_start(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
    record("start", domain, a);
    return next_id++;
}

static void
domain_end(nvtxDomainHandle_t domain, nvtxRangeId_t id)
{
    if (out != NULL)
        fprintf(out, "end %s %llu\n", domain_name(domain), (unsigned long long)id);
}

static void
domain_mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
    record("mark", domain, a);
}

static void
domain_category(nvtxDomainHandle_t domain, uint32_t category, const char *name)
{
    if (out != NULL)
        fprintf(out, "category %s %u %s\n", domain_name(domain), (unsigned)category, name);
}

static nvtxDomainHandle_t
domain_create(const char *name)
{
    if (out != NULL)
        fprintf(out, "domain %s\n", name);
    return (nvtxDomainHandle_t)strdup(name); /* kept for the process's life, as NVTX's are */
}

/* The default domain's calls: the same, with no handle. */
static int
push(const nvtxEventAttributes_t *a)
{
    return domain_push(NULL, a);
}
static int
pop(void)
{
    return domain_pop(NULL);
}
static nvtxRangeId_t
start(const nvtxEventAttributes_t *a)
{
    return domain_start(NULL, a);
}
static void
end(nvtxRangeId_t id)
{
    domain_end(NULL, id);
}
static void
mark(const nvtxEventAttributes_t *a)
{
    domain_mark(NULL, a);
}
static void
category(uint32_t id, const char *name)
{
    domain_category(NULL, id, name);
}

static int
install(const NvtxExportTableCallbacks *callbacks, NvtxCallbackModule module, const unsigned *ids,
        const NvtxFunctionPointer *functions, size_t n)
{
    NvtxFunctionTable table;
    unsigned size;
    if (!callbacks->GetModuleFunctionTable(module, &table, &size) || table == NULL)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < size)
            *table[ids[i]] = functions[i];
    return 1;
}

#define FN(f) ((NvtxFunctionPointer)(f))

/* NVTX calls this once, at the process's first NVTX call; 0 leaves NVTX without a tool. */
int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    if (callbacks == NULL)
        return 0;
    const char *path = getenv("GP_NVTX_RECORD");
    if (path != NULL && *path != '\0' && (out = fopen(path, "w")) != NULL)
        setvbuf(out, NULL, _IOLBF, 0); /* a line per call, even if the process dies */
    const unsigned core_ids[] = {NVTX_CBID_CORE_RangePushEx,  NVTX_CBID_CORE_RangePop,
                                 NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeEnd,
                                 NVTX_CBID_CORE_MarkEx,       NVTX_CBID_CORE_NameCategoryA};
    const NvtxFunctionPointer core[] = {FN(push), FN(pop),  FN(start),
                                        FN(end),  FN(mark), FN(category)};
    const unsigned core2_ids[] = {
        NVTX_CBID_CORE2_DomainRangePushEx,  NVTX_CBID_CORE2_DomainRangePop,
        NVTX_CBID_CORE2_DomainRangeStartEx, NVTX_CBID_CORE2_DomainRangeEnd,
        NVTX_CBID_CORE2_DomainMarkEx,       NVTX_CBID_CORE2_DomainNameCategoryA,
        NVTX_CBID_CORE2_DomainCreateA};
    const NvtxFunctionPointer core2[] = {FN(domain_push),  FN(domain_pop),  FN(domain_start),
                                         FN(domain_end),   FN(domain_mark), FN(domain_category),
                                         FN(domain_create)};
    return install(callbacks, NVTX_CB_MODULE_CORE, core_ids, core, 6) &&
           install(callbacks, NVTX_CB_MODULE_CORE2, core2_ids, core2, 7);
}
