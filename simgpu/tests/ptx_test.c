/*
 * ptx_test.c — module images and the spin-kernel convention: PTX entry
 * parsing (comments, .visible/.weak, parameter lists), spin durations from
 * kernelParams and from the `extra` buffer, the default duration otherwise,
 * libraries and CUkernel handles used as CUfunctions, cuModuleLoad from a
 * file, cubin/fatbin images, and the kernel names and dimensions in the
 * timeline.
 */
#include "testutil.h"
#include "driver/simgpu.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char ptx[] =
	".version 8.0\n.target sm_90\n.address_size 64\n"
	"// .entry commented_out(.param .u64 x_ns)\n"
	"/* .visible .entry also_commented(\n .param .u64 y_ns\n) */\n"
	".visible .entry _Z4spinPy(\n\t.param .u64 _Z4spinPy_param_0_ns\n)\n{\n\tret;\n}\n"
	".entry noparams\n{\n\tret;\n}\n"
	".weak .entry arrfirst(.param .align 8 .b8 s[16], .param .u64 x_ns) { ret; }\n"
	".visible .entry notns(.param .u64 duration) { ret; }\n"
	".visible .entry narrow(.param .u32 t_ns) { ret; }\n"
	".visible .entry two(.param .u64 .ptr .global .align 8 two_ns, .param .u32 n) { ret; }\n"
	".func (.reg .b32 r) helper(.param .b32 x) { ret; }\n";

static CUfunction get(CUmodule m, const char *name)
{
	CUfunction f = NULL;
	CUresult r = cuModuleGetFunction(&f, m, name);
	t_check(r == CUDA_SUCCESS, __FILE__, __LINE__, name, "cuModuleGetFunction: %s", t_errname(r));
	return f;
}

static void launch(CUfunction f, void **kp, void **extra)
{
	OK(cuLaunchKernel(f, 3, 2, 1, 64, 2, 1, 0, NULL, kp, extra));
}

/* A cubin-shaped ELF naming kernels only through .text.NAME sections. */
static size_t make_cubin(unsigned char *buf, size_t cap)
{
	const char strs[] = "\0.shstrtab\0.text.elf_kernel\0.text._Z3fooi\0.nv.info";
	size_t strs_len = sizeof strs, shoff = (sizeof(Elf64_Ehdr) + strs_len + 7) & ~(size_t)7;
	size_t total = shoff + 5 * sizeof(Elf64_Shdr);
	if (total > cap)
		return 0;
	memset(buf, 0, total);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_machine = 190; /* EM_CUDA */
	eh->e_shoff = shoff;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 5;
	eh->e_shstrndx = 1;
	memcpy(buf + sizeof(Elf64_Ehdr), strs, strs_len);
	Elf64_Shdr *sh = (Elf64_Shdr *)(buf + shoff);
	sh[1].sh_name = 1, sh[1].sh_type = SHT_STRTAB, sh[1].sh_offset = sizeof(Elf64_Ehdr), sh[1].sh_size = strs_len;
	sh[2].sh_name = 11, sh[2].sh_type = SHT_PROGBITS;
	sh[3].sh_name = 28, sh[3].sh_type = SHT_PROGBITS;
	sh[4].sh_name = 41, sh[4].sh_type = SHT_PROGBITS;
	return total;
}

int main(void)
{
	t_unique_shm("ptx");
	setenv("FIKIT_SIMGPU_VALIDATE", "1", 1);
	char tl[] = "/tmp/simgpu-ptx-timeline-XXXXXX";
	int fd = mkstemp(tl);
	close(fd);
	setenv("FIKIT_SIMGPU_TIMELINE", tl, 1);
	setenv("FIKIT_SIMGPU_DEFAULT_KERNEL_US", "700", 1);
	setenv("FIKIT_SIMGPU_LAUNCH_US", "4", 1);
	OK(cuInit(0));
	CUcontext c;
	OK(cuCtxCreate_v2(&c, 0, 0));

	CUmodule m;
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&m, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, "hello, world"));
	OK(cuModuleLoadData(&m, ptx));
	unsigned count = 0;
	OK(cuModuleGetFunctionCount(&count, m));
	CHECK(count == 6, "%u entries (comments and .func must not count)", count);
	CUfunction f;
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "commented_out"));
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "helper"));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(&f, m, NULL));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, (CUmodule)0x99, "noparams"));
	CUfunction spin = get(m, "_Z4spinPy"), nop = get(m, "noparams"), arr = get(m, "arrfirst"),
		   notns = get(m, "notns"), narrow = get(m, "narrow"), two = get(m, "two");
	const char *name = NULL;
	OK(cuFuncGetName(&name, spin));
	CHECK(name && !strcmp(name, "_Z4spinPy"));

	/* durations: launched in this order, checked on the timeline below */
	uint64_t ns = 3000000;
	void *kp[] = {&ns, &ns};
	launch(spin, kp, NULL);                           /* 3 ms */
	launch(nop, NULL, NULL);                          /* default 700 us */
	char s16[16] = {0};
	uint64_t big = 5000000;
	void *kp_arr[] = {s16, &big};
	launch(arr, kp_arr, NULL);                        /* first param is not .u64: default */
	launch(notns, kp, NULL);                          /* name lacks _ns: default */
	uint32_t n32 = 123456;
	void *kp_narrow[] = {&n32};
	launch(narrow, kp_narrow, NULL);                  /* .u32: default */
	uint32_t n = 7;
	void *kp_two[] = {&ns, &n};
	launch(two, kp_two, NULL);                        /* .u64 .ptr … two_ns: 3 ms */
	struct {
		uint64_t ns;
		uint32_t n;
	} buf = {2000000, 1};
	size_t bsz = sizeof buf;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsz, CU_LAUNCH_PARAM_END};
	launch(two, NULL, extra);                         /* 2 ms through `extra` */
	uint64_t zero = 0;
	void *kp_zero[] = {&zero};
	launch(spin, kp_zero, NULL);                      /* 0 ns is a valid spin */

	/* libraries: a CUkernel works where a CUfunction is expected */
	CUlibrary lib;
	OK(cuLibraryLoadData(&lib, t_ptx, NULL, NULL, 0, NULL, NULL, 0));
	CUkernel k;
	OK(cuLibraryGetKernel(&k, lib, "spin"));
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuLibraryGetKernel(&k, lib, "nope"));
	OK(cuLibraryGetKernelCount(&count, lib));
	CHECK(count == 2);
	OK(cuKernelGetName(&name, k));
	CHECK(name && !strcmp(name, "spin"));
	uint64_t kns = 1500000;
	void *kkp[] = {&kns};
	OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, kkp, NULL)); /* 1.5 ms */
	CUfunction kf;
	OK(cuKernelGetFunction(&kf, k));
	OK(cuFuncGetName(&name, (CUfunction)k));
	CHECK(name && !strcmp(name, "spin"));
	OK(cuLaunchKernel(kf, 1, 1, 1, 1, 1, 1, 0, NULL, kkp, NULL)); /* 1.5 ms */

	/* cuModuleLoad reads a file */
	char path[] = "/tmp/simgpu-ptx-XXXXXX";
	fd = mkstemp(path);
	CHECK(write(fd, t_ptx, strlen(t_ptx)) == (ssize_t)strlen(t_ptx));
	close(fd);
	CUmodule fm;
	OK(cuModuleLoad(&fm, path));
	get(fm, "plain");
	unlink(path);
	CHECK_CU(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&fm, path));

	/* binary images: cubin and a fatbin embedding it */
	unsigned char cub[1024];
	size_t clen = make_cubin(cub, sizeof cub);
	CUmodule bm;
	OK(cuModuleLoadData(&bm, cub));
	CUfunction ek = get(bm, "elf_kernel");
	get(bm, "_Z3fooi");
	CHECK_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, bm, "nv.info"));
	OK(cuLaunchKernel(ek, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)); /* unknown params: default 700 us */
	unsigned char fat[2048];
	memset(fat, 0, sizeof fat);
	uint32_t magic = 0xBA55ED50u;
	uint16_t ver = 1, hsize = 16;
	uint64_t fsize = 64 + clen;
	memcpy(fat, &magic, 4);
	memcpy(fat + 4, &ver, 2);
	memcpy(fat + 6, &hsize, 2);
	memcpy(fat + 8, &fsize, 8);
	memcpy(fat + 16 + 64, cub, clen);
	CUmodule fb;
	OK(cuModuleLoadData(&fb, fat));
	get(fb, "elf_kernel");

	OK(cuCtxSynchronize());
	OK(cuModuleUnload(m));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, kp, NULL));
	OK(cuLibraryUnload(lib));
	CHECK_CU(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, kkp, NULL));

	/* the timeline: names, dimensions and exact durations */
	CHECK(fikit_simgpu_timeline_flush() == 0);
	t_seg *v;
	int nseg = t_read_timeline(tl, &v);
	const struct {
		const char *name;
		long long dur;
	} want[] = {
		{"_Z4spinPy", 3000000}, {"noparams", 700000}, {"arrfirst", 700000}, {"notns", 700000},
		{"narrow", 700000},     {"two", 3000000},     {"two", 2000000},     {"_Z4spinPy", 0},
		{"spin", 1500000},      {"spin", 1500000},    {"elf_kernel", 700000},
	};
	int nwant = (int)(sizeof want / sizeof want[0]);
	CHECK(nseg == nwant, "%d timeline records, want %d", nseg, nwant);
	for (int i = 0; i < nseg && i < nwant; i++) {
		CHECK(!strcmp(v[i].name, want[i].name), "record %d is %s, want %s", i, v[i].name, want[i].name);
		CHECK(v[i].end - v[i].start == want[i].dur, "%s ran %lld ns, want %lld", v[i].name,
		      v[i].end - v[i].start, want[i].dur);
		CHECK(v[i].last && v[i].seg == 0 && v[i].pid == (int)getpid());
	}
	CHECK(nseg > 0 && v[0].grid[0] == 3 && v[0].grid[1] == 2 && v[0].block[0] == 64 && v[0].block[1] == 2);
	CHECK(t_overlaps(v, nseg) == 0);
	free(v);
	unlink(tl);
	OK(cuCtxDestroy_v2(c));
	return t_done("ptx_test");
}
