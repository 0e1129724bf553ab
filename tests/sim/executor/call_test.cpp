// The calls nvcc emits for device printf (vprintf) and assert (__assertfail), in nvcc 13's own
// form (a { // callseq } scope with .param declarations, the argument buffer in the thread's
// local depot reached through cvta.local), with exact expected output.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "harness.hpp"

using namespace rungs_sim_test;
namespace sim = rungs::sim;

namespace {

// A NUL-terminated string as nvcc declares it: .global .align 1 .b8 NAME[n] = {bytes, 0}.
std::string ptx_string(const std::string& name, const std::string& text) {
  std::string out = ".global .align 1 .b8 " + name + "[" + std::to_string(text.size() + 1) + "] = {";
  for (const char c : text) out += std::to_string(static_cast<unsigned char>(c)) + ", ";
  return out + "0};\n";
}

const std::string vprintf_decl = R"(
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
)";

// Threads 0 and 32 of each block print every argument kind, then a line without arguments
// (a null argument buffer); out[2 * block + tid / 32] gets the first printf's result.
const std::string printing_kernel = R"(
.visible .entry p(.param .u64 p_out, .param .f32 p_f, .param .f64 p_d)
{
	.local .align 8 .b8 	__local_depot0[48];
	.reg .b64 	%SP;
	.reg .b64 	%SPL;
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .f32 	%f<2>;
	.reg .f64 	%fd<3>;
	.reg .b64 	%rd<12>;

	mov.u64 	%SPL, __local_depot0;
	cvta.local.u64 	%SP, %SPL;
	ld.param.u64 	%rd9, [p_out];
	ld.param.f32 	%f1, [p_f];
	ld.param.f64 	%fd1, [p_d];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %tid.x;
	and.b32 	%r3, %r2, 31;
	setp.ne.u32 	%p1, %r3, 0;
	@%p1 bra 	$L__done;
	add.u64 	%rd3, %SP, 0;
	add.u64 	%rd4, %SPL, 0;
	cvt.f64.f32 	%fd2, %f1;
	mul.wide.u32 	%rd1, %r2, 1000000000;
	mov.u64 	%rd2, $str$1;
	cvta.global.u64 	%rd2, %rd2;
	add.u32 	%r4, %r1, 65;
	st.local.v2.u32 	[%rd4], {%r1, %r2};
	st.local.f64 	[%rd4+8], %fd2;
	st.local.f64 	[%rd4+16], %fd1;
	st.local.u64 	[%rd4+24], %rd1;
	st.local.u64 	[%rd4+32], %rd2;
	st.local.u32 	[%rd4+40], %r4;
	mov.u64 	%rd5, $str;
	cvta.global.u64 	%rd6, %rd5;
	{ // callseq 0, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd6;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd3;
	.param .b32 retval0;
	call.uni (retval0), 
	vprintf, 
	(
	param0, 
	param1
	);
	ld.param.b32 	%r5, [retval0+0];
	} // callseq 0
	mov.u64 	%rd7, $str$2;
	cvta.global.u64 	%rd8, %rd7;
	{ // callseq 1, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd8;
	.param .b64 param1;
	st.param.b64 	[param1+0], 0;
	.param .b32 retval0;
	call.uni (retval0), 
	vprintf, 
	(
	param0, 
	param1
	);
	} // callseq 1
	shr.u32 	%r6, %r2, 5;
	shl.b32 	%r7, %r1, 1;
	add.u32 	%r6, %r6, %r7;
	mul.wide.u32 	%rd10, %r6, 4;
	add.s64 	%rd11, %rd9, %rd10;
	st.global.u32 	[%rd11], %r5;
$L__done:
	ret;
}
)";

}  // namespace

TEST_CASE("device printf (vprintf): every argument kind, per-thread output in block and thread order under any seed",
          "[op:call.uni][op:cvta.local.u64]") {
  const std::string text = ptx_module(vprintf_decl + ptx_string("$str", "b%d t%u f=%f d=%.3f q=%lld %s %c%%\n") +
                                      ptx_string("$str$1", "ok") + ptx_string("$str$2", "end\n") + printing_kernel);
  const std::string expected =
      "b0 t0 f=1.500000 d=2.718 q=0 ok A%\nend\n"
      "b0 t32 f=1.500000 d=2.718 q=32000000000 ok A%\nend\n"
      "b1 t0 f=1.500000 d=2.718 q=0 ok B%\nend\n"
      "b1 t32 f=1.500000 d=2.718 q=32000000000 ok B%\nend\n";
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    std::vector<std::uint32_t> out(4, 0xdeadbeefu);
    host_memory mem;
    mem.add(out);
    sim::schedule s;
    s.seed = seed;
    s.print_device_output = false;
    const auto r = run(text, "p", {2, 1, 1}, {40, 1, 1}, mem, s, out.data(), 1.5f, 2.71828);
    CHECK(r.device_output == expected);
    CHECK(out == std::vector<std::uint32_t>{7, 7, 7, 7});  // printf returns the arguments it read
  }
}

TEST_CASE("device printf: an unsupported conversion is a finding naming the format", "[op:call.uni]") {
  const std::string text = ptx_module(vprintf_decl + ptx_string("$str", "n=%n\n") + R"(
.visible .entry p()
{
	.reg .b64 	%rd<3>;
	mov.u64 	%rd1, $str;
	cvta.global.u64 	%rd2, %rd1;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd2;
	.param .b64 param1;
	st.param.b64 	[param1+0], 0;
	call.uni 
	vprintf, 
	(
	param0, 
	param1
	);
	} // callseq 0
	ret;
}
)");
  host_memory mem;
  CHECK_THROWS_WITH(run(text, "p", {1, 1, 1}, {1, 1, 1}, mem, sim::schedule{}),
                    Catch::Contains("device printf format \"n=%n\n\": conversion '%n' is not supported"));
}

TEST_CASE("assert (__assertfail): a finding naming the assertion, source line, function, kernel, block and thread",
          "[op:call.uni]") {
  // nvcc 13's PTX for __global__ void ka(int* p) { assert(p[threadIdx.x] > 0); } (k.cu line 7).
  const std::string text = ptx_module(R"(
.extern .func __assertfail
(
	.param .b64 __assertfail_param_0,
	.param .b64 __assertfail_param_1,
	.param .b32 __assertfail_param_2,
	.param .b64 __assertfail_param_3,
	.param .b64 __assertfail_param_4
)
;
)" + ptx_string("__unnamed_1", "void ka(int *)") + ptx_string("$str$2", "p[threadIdx.x] > 0") +
                                      ptx_string("$str$3", "/src/k.cu") + R"(
.visible .entry _Z2kaPi(
	.param .u64 _Z2kaPi_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [_Z2kaPi_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.u32 	%r2, [%rd4];
	setp.gt.s32 	%p1, %r2, 0;
	@%p1 bra 	$L__BB1_2;

	mov.u64 	%rd5, $str$2;
	cvta.global.u64 	%rd6, %rd5;
	mov.u64 	%rd7, $str$3;
	cvta.global.u64 	%rd8, %rd7;
	mov.u64 	%rd9, __unnamed_1;
	cvta.global.u64 	%rd10, %rd9;
	{ // callseq 2, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd6;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd8;
	.param .b32 param2;
	st.param.b32 	[param2+0], 7;
	.param .b64 param3;
	st.param.b64 	[param3+0], %rd10;
	.param .b64 param4;
	st.param.b64 	[param4+0], 1;
	call.uni 
	__assertfail, 
	(
	param0, 
	param1, 
	param2, 
	param3, 
	param4
	);
	} // callseq 2

$L__BB1_2:
	ret;

}
)");
  std::vector<std::int32_t> v{1, 2, 3, 4};
  host_memory mem;
  mem.add(v);
  CHECK_NOTHROW(run(text, "_Z2kaPi", {1, 1, 1}, {4, 1, 1}, mem, sim::schedule{}, v.data()));
  v[2] = 0;
  CHECK_THROWS_WITH(run(text, "_Z2kaPi", {1, 1, 1}, {4, 1, 1}, mem, sim::schedule{}, v.data()),
                    Catch::StartsWith("kernel _Z2kaPi (module test.ptx): device assertion `p[threadIdx.x] > 0` failed "
                                      "(k.cu:7, in void ka(int *)) at PTX line ") &&
                        Catch::EndsWith("thread (2,0,0) of block (0,0,0)"));
}

TEST_CASE("a call of any other function loads, and fails when executed naming it", "[op:call.uni]") {
  const std::string text = ptx_module(R"(
.extern .func  (.param .b32 func_retval0) helper
(
	.param .b32 helper_param_0
)
;
.visible .entry p(.param .u32 p_run)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<3>;
	ld.param.u32 	%r1, [p_run];
	setp.eq.u32 	%p1, %r1, 0;
	@%p1 bra 	$L__done;
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.b32 	[param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), 
	helper, 
	(
	param0
	);
	ld.param.b32 	%r2, [retval0+0];
	} // callseq 0
$L__done:
	ret;
}
)");
  host_memory mem;
  CHECK_NOTHROW(run(text, "p", {1, 1, 1}, {32, 1, 1}, mem, sim::schedule{}, 0u));
  CHECK_THROWS_WITH(run(text, "p", {1, 1, 1}, {32, 1, 1}, mem, sim::schedule{}, 1u),
                    Catch::Contains("a call of 'helper'") && Catch::Contains("must be inlined"));
}
