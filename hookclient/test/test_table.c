/* test_table.c — cuGetProcAddress variant selection over the table made
 * from hooks.def: the variant the driver returns for (symbol, cudaVersion,
 * per-thread flag), and a cross-check of every listed base's newest legacy
 * and per-thread versions against NVIDIA's own cudaTypedefs.h (argv[2]:
 * the CUDA include directory). */
#include "check.h"
#include "table.h"

#include <stdlib.h>
#include <string.h>

static const char *sel(const char *sym, int ver, int pt)
{
	int s = fk_proc_select(sym, ver, pt);
	return s < 0 ? "-" : fk_slot_name[s];
}

#define EXPECT(sym, ver, pt, want)                                                                 \
	CHECK(!strcmp(sel(sym, ver, pt), want), "%s@%d pt=%d -> %s, want %s", sym, ver, pt, sel(sym, ver, pt), want)

static void selection(void)
{
	EXPECT("cuLaunchKernel", 12040, 0, "cuLaunchKernel");
	EXPECT("cuLaunchKernel", 12040, 1, "cuLaunchKernel_ptsz");
	EXPECT("cuLaunchKernel", 6050, 1, "cuLaunchKernel"); /* no _ptsz before 7.0 */
	EXPECT("cuLaunchKernel", 3020, 0, "-");
	EXPECT("cuLaunchKernelEx", 12000, 1, "cuLaunchKernelEx_ptsz");
	EXPECT("cuLaunchKernelEx", 11050, 0, "-");
	EXPECT("cuLaunchCooperativeKernel", 9000, 1, "cuLaunchCooperativeKernel_ptsz");
	EXPECT("cuGraphLaunch", 12000, 0, "cuGraphLaunch");
	EXPECT("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
	EXPECT("cuGetProcAddress", 11080, 1, "cuGetProcAddress");
	EXPECT("cuGetProcAddress", 11020, 0, "-");
	EXPECT("cuMemcpyDtoH", 12000, 0, "cuMemcpyDtoH_v2");
	EXPECT("cuMemcpyDtoH", 12000, 1, "cuMemcpyDtoH_v2_ptds");
	EXPECT("cuMemcpyDtoH", 3010, 0, "-"); /* the 32-bit v1: not ours, passed through */
	EXPECT("cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags");
	EXPECT("cuGraphInstantiate", 11080, 0, "cuGraphInstantiate_v2");
	EXPECT("cuGraphInstantiate", 10020, 1, "cuGraphInstantiate");
	EXPECT("cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags");
	EXPECT("cuGraphInstantiateWithParams", 12040, 1, "cuGraphInstantiateWithParams_ptsz");
	EXPECT("cuGraphExecUpdate", 12000, 0, "cuGraphExecUpdate_v2");
	EXPECT("cuGraphExecUpdate", 11000, 0, "cuGraphExecUpdate");
	EXPECT("cuStreamBeginCapture", 12000, 1, "cuStreamBeginCapture_v2_ptsz");
	EXPECT("cuStreamBeginCapture", 10000, 1, "cuStreamBeginCapture_ptsz");
	EXPECT("cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture");
	EXPECT("cuCtxSynchronize", 12000, 1, "cuCtxSynchronize"); /* no stream: no per-thread variant */
	EXPECT("cuStreamSynchronize", 12000, 1, "cuStreamSynchronize_ptsz");
	EXPECT("cuMemcpy", 12000, 1, "cuMemcpy_ptds");
	EXPECT("cuModuleGetFunction", 2000, 0, "cuModuleGetFunction");
	EXPECT("cuLibraryGetKernel", 12000, 0, "cuLibraryGetKernel");
	EXPECT("cuMemAlloc", 12000, 0, "-");
	EXPECT("cuInit", 12000, 0, "-");
	EXPECT("", 12000, 0, "-");
	/* A full versioned name names its variant. */
	EXPECT("cuLaunchKernel_ptsz", 12000, 0, "cuLaunchKernel_ptsz");
	EXPECT("cuMemcpyDtoH_v2", 12000, 0, "cuMemcpyDtoH_v2");
	CHECK(fk_slot_of("dlsym") < 0 && fk_slot_of("cu") < 0 && fk_slot_of("cuLaunchKernel") >= 0, "slot_of");
}

/* Every slot is reachable through its own base; no two rows of a base
 * share (version, pt) (the selection would be ambiguous). */
static void table_shape(void)
{
	for (int s = 0; s < FK_NSLOTS; s++) {
		int rows = 0;
		for (int i = 0; i < fk_nproc_rows; i++)
			rows += fk_proc_rows[i].slot == s;
		CHECK(rows >= 1, "%s unreachable", fk_slot_name[s]);
		CHECK(fk_slot_pt[s] == (strstr(fk_slot_name[s], "_pt") != NULL), "%s pt flag", fk_slot_name[s]);
	}
	for (int i = 0; i < fk_nproc_rows; i++)
		for (int j = i + 1; j < fk_nproc_rows; j++)
			CHECK(strcmp(fk_proc_rows[i].base, fk_proc_rows[j].base) ||
				      fk_proc_rows[i].version != fk_proc_rows[j].version ||
				      fk_proc_rows[i].pt != fk_proc_rows[j].pt,
			      "%s: two rows at %d", fk_proc_rows[i].base, fk_proc_rows[i].version);
}

/* NVIDIA's cudaTypedefs.h names the newest variant of each base:
 *   #define PFN_cuX  PFN_cuX_vNNNN
 *   #define PFN_cuX  __API_TYPEDEF_PTSZ(PFN_cuX, legacy, perthread)   (or _PTDS)
 * Bases whose PFN points at another name (cuGraphInstantiate → WithFlags)
 * are remaps the driver applies from a later version; they are skipped. */
static void against_nvidia(const char *incdir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/cudaTypedefs.h", incdir);
	FILE *f = fopen(path, "r");
	if (!f) {
		CHECK(0, "cannot open %s", path);
		return;
	}
	char line[1024];
	int checked = 0, remaps = 0;
	while (fgets(line, sizeof line, f)) {
		char name[256], rhs[512];
		if (sscanf(line, " #define PFN_%255s %511[^\n]", name, rhs) != 2)
			continue;
		int known = 0;
		for (int i = 0; i < fk_nproc_rows; i++)
			known |= !strcmp(fk_proc_rows[i].base, name);
		if (!known)
			continue;
		int legacy = -1, pt = -1;
		char other[256];
		if (sscanf(rhs, "__API_TYPEDEF_PT%*2[SZD](PFN_%255[^,], %d, %d)", other, &legacy, &pt) == 3) {
			if (strcmp(other, name)) {
				remaps++;
				continue;
			}
		} else if (sscanf(rhs, "PFN_%255s", other) == 1) {
			char *v = strrchr(other, '_');
			if (!v || v[1] != 'v' || strncmp(other, name, (size_t)(v - other)) ||
			    (size_t)(v - other) != strlen(name)) {
				remaps++; /* a remap to another name */
				continue;
			}
			legacy = atoi(v + 2);
		} else {
			continue;
		}
		int newest[2] = {-1, -1};
		for (int i = 0; i < fk_nproc_rows; i++) {
			const fk_proc_row *r = &fk_proc_rows[i];
			if (!strcmp(r->base, name) && r->version > newest[r->pt])
				newest[r->pt] = r->version;
		}
		CHECK(newest[0] == legacy, "%s: newest legacy variant %d, cudaTypedefs.h says %d", name, newest[0],
		      legacy);
		/* A base with a per-thread family must have it listed, or a
		 * per-thread lookup would get the legacy wrapper. */
		if (pt >= 0)
			CHECK(newest[1] == pt, "%s: newest per-thread variant %d, cudaTypedefs.h says %d", name,
			      newest[1], pt);
		checked++;
	}
	fclose(f);
	int bases = 0;
	for (int i = 0; i < fk_nproc_rows; i++) {
		int first = 1;
		for (int j = 0; j < i; j++)
			first &= strcmp(fk_proc_rows[i].base, fk_proc_rows[j].base) != 0;
		bases += first;
	}
	CHECK(checked + remaps == bases, "%d of %d bases found in cudaTypedefs.h", checked + remaps, bases);
	CHECK(remaps <= 1, "%d remapped bases (only cuGraphInstantiate expected)", remaps);
	printf("test_table: %d bases agree with cudaTypedefs.h, %d remapped\n", checked, remaps);
}

int main(int argc, char **argv)
{
	check_init(argc, argv);
	selection();
	table_shape();
	if (argc > 2)
		against_nvidia(argv[2]);
	else
		CHECK(0, "usage: test_table ROOT CUDA_INCLUDE_DIR");
	return check_done("test_table");
}
