// The `vkflash` executable as users script it: correct outputs through .npy files, and the
// bad-input contract (exit 2, one line on stderr, no output file left behind). Runs with
// VKFLASH_VALIDATION=1: any validation message the CLI prints fails the test.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_error.h"
#include "npy.h"
#include "reference_attention.h"
#include "support/attention_case.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

// Each test case works in a folder of its own: CTest runs them in parallel.
std::string g_dir = "vkflash_cli_test_files";
void UseFolder(const std::string& name) {
  g_dir = "vkflash_cli_" + name;
  ::mkdir(g_dir.c_str(), 0755);
}

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

CliResult RunCli(const std::string& args, const std::string& env = "") {
  const std::string out = g_dir + "/stdout.txt", err = g_dir + "/stderr.txt";
  const std::string command =
      "VKFLASH_VALIDATION=1 " + env + " " + VKFLASH_CLI_PATH + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = Slurp(out);
  result.err = Slurp(err);
  return result;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string Path(const std::string& name) { return g_dir + "/" + name; }

void WriteTensor(const std::string& name, DataType dtype, std::vector<uint64_t> shape, uint32_t seed) {
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;
  REQUIRE(tools::WriteNpy(Path(name), tools::MakeNpy(dtype, shape, RandomValues(count, dtype, seed))).ok());
}

std::vector<float> ReadFloats(const std::string& name) {
  auto array = tools::ReadNpy(Path(name));
  REQUIRE(array.ok());
  std::vector<float> values(array->element_count());
  for (uint64_t i = 0; i < values.size(); ++i) values[i] = array->at(i);
  return values;
}

void RequireBadInput(const std::string& args, const std::string& needle, const std::string& env = "") {
  std::remove(Path("bad_out.npy").c_str());
  std::remove(Path("bad_lse.npy").c_str());
  INFO("vkflash " << args);
  const CliResult r = RunCli(args, env);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(r.err.find("[validation") == std::string::npos);
  CHECK_FALSE(Exists(Path("bad_out.npy")));
  CHECK_FALSE(Exists(Path("bad_lse.npy")));
}

}  // namespace

TEST_CASE("CLI forward writes O and LSE matching the float64 reference", "[cli]") {
  UseFolder("forward");
  struct Case {
    DataType dtype;
    bool causal;
    const char* scale;
    AttentionWindow window;
  };
  for (const Case c : {Case{DataType::kFloat32, true, "", {}}, Case{DataType::kFloat16, false, "0.2", {}},
                       Case{DataType::kFloat16, true, "", {}}, Case{DataType::kFloat32, false, "", {5, 2}},
                       Case{DataType::kFloat16, true, "", {3, -1}}}) {
    WriteTensor("q.npy", c.dtype, {2, 4, 19, 40}, 1);
    WriteTensor("k.npy", c.dtype, {2, 2, 33, 40}, 2);
    WriteTensor("v.npy", c.dtype, {2, 2, 33, 40}, 3);
    std::string args = "forward --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("v.npy") +
                       " --out " + Path("o.npy") + " --lse " + Path("lse.npy");
    if (c.causal) args += " --causal";
    if (*c.scale) args += std::string(" --scale ") + c.scale;
    if (c.window.left != -1 || c.window.right != -1)
      args += " --window " + std::to_string(c.window.left) + "," + std::to_string(c.window.right);
    INFO(args);
    const CliResult r = RunCli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());

    auto o_file = tools::ReadNpy(Path("o.npy"));
    REQUIRE(o_file.ok());
    CHECK(o_file->dtype == c.dtype);  // outputs keep the input dtype
    CHECK(o_file->shape == std::vector<uint64_t>{2, 4, 19, 40});
    auto lse_file = tools::ReadNpy(Path("lse.npy"));
    REQUIRE(lse_file.ok());
    CHECK(lse_file->dtype == DataType::kFloat32);
    CHECK(lse_file->shape == std::vector<uint64_t>{2, 4, 19});

    AttentionParams params;
    params.shape = {2, 4, 2, 19, 33, 40};
    params.dtype = c.dtype;
    params.causal = c.causal;
    params.window = c.window;
    if (*c.scale) params.scale = std::stof(c.scale);
    const auto reference = tools::ReferenceAttentionForward(params, ReadFloats("q.npy"), ReadFloats("k.npy"), ReadFloats("v.npy"));
    CHECK(tools::RelativeError(ReadFloats("o.npy"), reference.o) <= ForwardTolerance(c.dtype));
    CHECK(tools::RelativeError(ReadFloats("lse.npy"), reference.lse) <= ForwardTolerance(c.dtype));
  }
}

TEST_CASE("CLI refuses bad input with exit 2, one line, and no output file", "[cli]") {
  UseFolder("bad_input");
  WriteTensor("q.npy", DataType::kFloat32, {1, 4, 8, 16}, 1);
  WriteTensor("k.npy", DataType::kFloat32, {1, 2, 8, 16}, 2);
  WriteTensor("v.npy", DataType::kFloat32, {1, 2, 8, 16}, 3);
  WriteTensor("v_short.npy", DataType::kFloat32, {1, 2, 7, 16}, 3);
  WriteTensor("k3.npy", DataType::kFloat32, {1, 3, 8, 16}, 2);
  WriteTensor("k_f16.npy", DataType::kFloat16, {1, 2, 8, 16}, 2);
  WriteTensor("q_d512.npy", DataType::kFloat32, {1, 1, 2, 512}, 1);
  WriteTensor("k_d512.npy", DataType::kFloat32, {1, 1, 2, 512}, 1);
  WriteTensor("q_3d.npy", DataType::kFloat32, {4, 8, 16}, 1);
  WriteTensor("q_d8.npy", DataType::kFloat32, {1, 4, 8, 8}, 1);
  {
    std::ofstream corrupt(Path("corrupt.npy"), std::ios::binary);
    corrupt << "\x93NUMPY garbage";
  }
  const std::string q = " --q " + Path("q.npy"), k = " --k " + Path("k.npy"), v = " --v " + Path("v.npy");
  const std::string out = " --out " + Path("bad_out.npy") + " --lse " + Path("bad_lse.npy");

  RequireBadInput("forward --q " + Path("missing.npy") + k + v + out, "missing.npy");
  RequireBadInput("forward --q " + Path("corrupt.npy") + k + v + out, "corrupt.npy");
  RequireBadInput("forward" + q + k + " --v " + Path("v_short.npy") + out, "shape");
  RequireBadInput("forward" + q + " --k " + Path("k3.npy") + " --v " + Path("k3.npy") + out, "multiple");
  RequireBadInput("forward" + q + " --k " + Path("k_f16.npy") + " --v " + Path("k_f16.npy") + out, "dtype");
  RequireBadInput("forward --q " + Path("q_d512.npy") + " --k " + Path("k_d512.npy") + " --v " + Path("k_d512.npy") + out,
                  "head dim");
  RequireBadInput("forward --q " + Path("q_d8.npy") + k + v + out, "head dim");
  RequireBadInput("forward --q " + Path("q_3d.npy") + k + v + out, "4 dimensions");
  RequireBadInput("forward" + q + k + v + out + " --bogus", "bogus");
  RequireBadInput("forward" + q + k + out, "--v");
  RequireBadInput("forward" + q + k + v + out + " --scale nan", "scale");
  RequireBadInput("forward" + q + k + v + out + " --window -2,0", "window left");
  RequireBadInput("forward" + q + k + v + out + " --window 4", "--window");
  RequireBadInput("forward" + q + k + v + out + " --window 4,x", "--window");
  RequireBadInput("forward" + q + k + v + out + " --window 4,3 --causal", "causal");
  RequireBadInput("forward" + q + k + v + out + " --device 99", "99");
  RequireBadInput("forward" + q + k + v + out, "no-such-gpu", "VKFLASH_DEVICE=no-such-gpu");
  RequireBadInput("forward" + q + k + v + " --out " + Path("no_such_dir/o.npy"), "no_such_dir");
  RequireBadInput("frobnicate", "frobnicate");
}

TEST_CASE("CLI leaves an existing output file untouched when it fails", "[cli]") {
  UseFolder("untouched");
  WriteTensor("q.npy", DataType::kFloat32, {1, 1, 4, 16}, 1);
  {
    std::ofstream keep(Path("keep.npy"));
    keep << "previous contents";
  }
  const CliResult r = RunCli("forward --q " + Path("q.npy") + " --k " + Path("missing.npy") + " --v " +
                             Path("missing.npy") + " --out " + Path("keep.npy"));
  CHECK(r.exit_code == 2);
  CHECK(Slurp(Path("keep.npy")) == "previous contents");
}

TEST_CASE("CLI info and help succeed", "[cli]") {
  UseFolder("info");
  CliResult r = RunCli("info");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("forward kernels chosen") != std::string::npos);
  CHECK(r.err.empty());
  r = RunCli("--help");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("forward") != std::string::npos);
}

TEST_CASE("CLI backward writes dQ, dK, dV matching the float64 reference gradients", "[cli][backward]") {
  UseFolder("backward");
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool causal : {false, true}) {
      const AttentionWindow window = causal ? AttentionWindow{6, -1} : AttentionWindow{};
      WriteTensor("q.npy", dtype, {1, 4, 21, 24}, 1);
      WriteTensor("k.npy", dtype, {1, 2, 30, 24}, 2);
      WriteTensor("v.npy", dtype, {1, 2, 30, 24}, 3);
      WriteTensor("do.npy", dtype, {1, 4, 21, 24}, 4);
      std::string args = "backward --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("v.npy") +
                         " --do " + Path("do.npy") + " --dq " + Path("dq.npy") + " --dk " + Path("dk.npy") +
                         " --dv " + Path("dv.npy") + " --scale 0.3";
      if (causal) args += " --causal --window 6,-1";  // a causal sliding window of 7 keys
      INFO(args);
      const CliResult r = RunCli(args);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(r.err.empty());

      AttentionParams params;
      params.shape = {1, 4, 2, 21, 30, 24};
      params.dtype = dtype;
      params.causal = causal;
      params.window = window;
      params.scale = 0.3f;
      const auto reference = tools::ReferenceAttentionBackward(params, ReadFloats("q.npy"), ReadFloats("k.npy"),
                                                               ReadFloats("v.npy"), ReadFloats("do.npy"));
      for (const char* name : {"dq.npy", "dk.npy", "dv.npy"}) {
        auto file = tools::ReadNpy(Path(name));
        REQUIRE(file.ok());
        CHECK(file->dtype == dtype);
      }
      CHECK(tools::RelativeError(ReadFloats("dq.npy"), reference.dq) <= BackwardTolerance(dtype));
      CHECK(tools::RelativeError(ReadFloats("dk.npy"), reference.dk) <= BackwardTolerance(dtype));
      CHECK(tools::RelativeError(ReadFloats("dv.npy"), reference.dv) <= BackwardTolerance(dtype));
    }
  }
}

TEST_CASE("CLI backward refuses bad input with exit 2 and writes no gradient file", "[cli][backward]") {
  UseFolder("backward_bad");
  WriteTensor("q.npy", DataType::kFloat32, {1, 2, 8, 16}, 1);
  WriteTensor("k.npy", DataType::kFloat32, {1, 2, 8, 16}, 2);
  WriteTensor("do_short.npy", DataType::kFloat32, {1, 2, 7, 16}, 3);
  WriteTensor("do_f16.npy", DataType::kFloat16, {1, 2, 8, 16}, 3);
  const std::string inputs = " --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("k.npy");
  const std::string outputs = " --dq " + Path("bad_out.npy") + " --dk " + Path("bad_lse.npy") + " --dv " + Path("bad_dv.npy");
  RequireBadInput("backward" + inputs + " --do " + Path("do_short.npy") + outputs, "dO");
  RequireBadInput("backward" + inputs + " --do " + Path("do_f16.npy") + outputs, "dO");
  RequireBadInput("backward" + inputs + " --do " + Path("missing.npy") + outputs, "missing.npy");
  RequireBadInput("backward" + inputs + outputs, "--do");
  CHECK_FALSE(Exists(Path("bad_dv.npy")));
  // Two gradients to one file would leave one of them lost: refused.
  WriteTensor("do.npy", DataType::kFloat32, {1, 2, 8, 16}, 3);
  const std::string clash = " --dq " + Path("bad_out.npy") + " --dk " + Path("bad_lse.npy") + " --dv " + Path("bad_out.npy");
  RequireBadInput("backward" + inputs + " --do " + Path("do.npy") + clash, "bad_out.npy");
}

namespace {

void WriteFloats(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& values,
                 DataType dtype = DataType::kFloat32) {
  REQUIRE(tools::WriteNpy(Path(name), tools::MakeNpy(dtype, std::move(shape), values)).ok());
}

}  // namespace

TEST_CASE("CLI forward and backward with --softcap, --alibi and --sinks match the float64 reference",
          "[cli][backward][softcap][alibi][sinks]") {
  UseFolder("score_variants");
  struct Case {
    DataType dtype;
    const char* softcap;
    bool per_batch_slopes, sinks, causal;
    AttentionWindow window;
  };
  const uint64_t b = 2, hq = 4, hkv = 2, nq = 19, nk = 33, d = 40;
  for (const Case c : {Case{DataType::kFloat32, "5", false, true, true, {}},
                       Case{DataType::kFloat16, "", true, true, false, {5, 2}},
                       Case{DataType::kFloat32, "0.5", false, false, false, {}},
                       Case{DataType::kFloat16, "30", true, false, true, {8, -1}}}) {
    WriteTensor("q.npy", c.dtype, {b, hq, nq, d}, 1);
    WriteTensor("k.npy", c.dtype, {b, hkv, nk, d}, 2);
    WriteTensor("v.npy", c.dtype, {b, hkv, nk, d}, 3);
    WriteTensor("do.npy", c.dtype, {b, hq, nq, d}, 4);
    const std::vector<float> slopes = c.per_batch_slopes ? std::vector<float>{0.5f, 0.25f, 0.125f, 0.0625f, 0.4f, 0.2f, 0.1f, 0.05f}
                                                         : std::vector<float>{0.3f, 0.1f, 0.03f, 0.01f};
    const std::vector<float> sinks = {1.0f, 3.5f, -2.0f, 0.0f};
    WriteFloats("slopes.npy", c.per_batch_slopes ? std::vector<uint64_t>{b, hq} : std::vector<uint64_t>{hq}, slopes);
    WriteFloats("sinks.npy", {hq}, sinks);

    std::string variants = " --alibi " + Path("slopes.npy");
    if (c.sinks) variants += " --sinks " + Path("sinks.npy");
    if (*c.softcap) variants += std::string(" --softcap ") + c.softcap;
    if (c.causal) variants += " --causal";
    if (c.window.left != -1 || c.window.right != -1)
      variants += " --window " + std::to_string(c.window.left) + "," + std::to_string(c.window.right);
    const std::string io = " --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("v.npy");
    CliResult r = RunCli("forward" + io + " --out " + Path("o.npy") + " --lse " + Path("lse.npy") + variants);
    INFO(variants << "\n" << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());
    std::remove(Path("dsinks.npy").c_str());
    r = RunCli("backward" + io + " --do " + Path("do.npy") + " --dq " + Path("dq.npy") + " --dk " + Path("dk.npy") +
               " --dv " + Path("dv.npy") + (c.sinks ? " --dsinks " + Path("dsinks.npy") : "") + variants);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());

    AttentionParams params;
    params.shape = {uint32_t(b), uint32_t(hq), uint32_t(hkv), uint32_t(nq), uint32_t(nk), uint32_t(d)};
    params.dtype = c.dtype;
    params.causal = c.causal;
    params.window = c.window;
    params.softcap = *c.softcap ? std::stof(c.softcap) : 0.0f;
    params.alibi = c.per_batch_slopes ? AlibiSlopes::kPerBatchHead : AlibiSlopes::kPerHead;
    params.sinks = c.sinks;
    const tools::ReferenceVariants values{slopes, c.sinks ? sinks : std::vector<float>{}};
    const auto q = ReadFloats("q.npy"), k = ReadFloats("k.npy"), v = ReadFloats("v.npy"), d_o = ReadFloats("do.npy");
    const auto forward = tools::ReferenceAttentionForward(params, q, k, v, values);
    CHECK(tools::RelativeError(ReadFloats("o.npy"), forward.o) <= ForwardTolerance(c.dtype));
    CHECK(tools::RelativeError(ReadFloats("lse.npy"), forward.lse) <= ForwardTolerance(c.dtype));
    const auto backward = tools::ReferenceAttentionBackward(params, q, k, v, d_o, values);
    CHECK(tools::RelativeError(ReadFloats("dq.npy"), backward.dq) <= BackwardTolerance(c.dtype));
    CHECK(tools::RelativeError(ReadFloats("dk.npy"), backward.dk) <= BackwardTolerance(c.dtype));
    CHECK(tools::RelativeError(ReadFloats("dv.npy"), backward.dv) <= BackwardTolerance(c.dtype));
    if (c.sinks) {
      auto file = tools::ReadNpy(Path("dsinks.npy"));
      REQUIRE(file.ok());
      CHECK(file->dtype == DataType::kFloat32);  // float32 whatever the tensors' dtype
      CHECK(file->shape == std::vector<uint64_t>{hq});
      CHECK(DsinksError(c.dtype, ReadFloats("dsinks.npy"), backward) <= BackwardTolerance(c.dtype));
    }
  }
}

TEST_CASE("CLI refuses bad score variants with exit 2, one line, and no output file", "[cli][softcap][alibi][sinks]") {
  UseFolder("score_variants_bad");
  WriteTensor("q.npy", DataType::kFloat32, {2, 4, 8, 16}, 1);
  WriteTensor("k.npy", DataType::kFloat32, {2, 2, 8, 16}, 2);
  WriteTensor("do.npy", DataType::kFloat32, {2, 4, 8, 16}, 3);
  WriteFloats("slopes.npy", {4}, {0.5f, 0.25f, 0.125f, 0.0625f});
  WriteFloats("slopes3.npy", {3}, {0.5f, 0.25f, 0.125f});
  WriteFloats("slopes_b3.npy", {3, 4}, std::vector<float>(12, 0.1f));
  WriteFloats("slopes_3d.npy", {1, 2, 4}, std::vector<float>(8, 0.1f));
  WriteFloats("slopes_f16.npy", {4}, {0.5f, 0.25f, 0.125f, 0.0625f}, DataType::kFloat16);
  WriteFloats("sinks.npy", {4}, {0.0f, 1.0f, 2.0f, 3.0f});
  WriteFloats("sinks5.npy", {5}, std::vector<float>(5, 0.0f));
  WriteFloats("sinks_2d.npy", {1, 4}, std::vector<float>(4, 0.0f));
  WriteFloats("sinks_f16.npy", {4}, std::vector<float>(4, 0.0f), DataType::kFloat16);
  const std::string io = " --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("k.npy");
  const std::string out = " --out " + Path("bad_out.npy") + " --lse " + Path("bad_lse.npy");

  for (const char* softcap : {"nan", "inf", "-inf", "-1", "-0.001"})
    RequireBadInput("forward" + io + out + " --softcap " + softcap, "--softcap");
  RequireBadInput("forward" + io + out + " --softcap x", "--softcap");
  RequireBadInput("forward" + io + out + " --alibi " + Path("slopes3.npy"), "--alibi");
  RequireBadInput("forward" + io + out + " --alibi " + Path("slopes_b3.npy"), "[B, Hq] (2, 4)");
  RequireBadInput("forward" + io + out + " --alibi " + Path("slopes_3d.npy"), "slopes_3d.npy");
  RequireBadInput("forward" + io + out + " --alibi " + Path("slopes_f16.npy"), "float32");
  RequireBadInput("forward" + io + out + " --alibi " + Path("missing.npy"), "missing.npy");
  RequireBadInput("forward" + io + out + " --sinks " + Path("sinks5.npy"), "--sinks");
  RequireBadInput("forward" + io + out + " --sinks " + Path("sinks_2d.npy"), "--sinks");
  RequireBadInput("forward" + io + out + " --sinks " + Path("sinks_f16.npy"), "float32");
  // An output over the slopes or sinks it reads is refused, and they stay as they were.
  const std::string sinks_before = Slurp(Path("sinks.npy"));
  RequireBadInput("forward" + io + " --out " + Path("sinks.npy") + " --sinks " + Path("sinks.npy"), "also an input");
  CHECK(Slurp(Path("sinks.npy")) == sinks_before);

  const std::string grads = " --do " + Path("do.npy") + " --dq " + Path("bad_out.npy") + " --dk " + Path("bad_lse.npy") +
                            " --dv " + Path("bad_dv.npy");
  RequireBadInput("backward" + io + grads + " --dsinks " + Path("bad_dsinks.npy"), "--dsinks needs --sinks");
  RequireBadInput("backward" + io + grads + " --dsinks " + Path("bad_dsinks.npy") + " --sinks " + Path("sinks5.npy"),
                  "--sinks");
  RequireBadInput("backward" + io + grads + " --softcap -3 --dsinks " + Path("bad_dsinks.npy") + " --sinks " +
                      Path("sinks.npy"),
                  "--softcap");
  RequireBadInput("backward" + io + grads + " --alibi " + Path("slopes3.npy"), "--alibi");
  RequireBadInput("backward" + io + grads + " --dsinks " + Path("sinks.npy") + " --sinks " + Path("sinks.npy"),
                  "also an input");
  CHECK(Slurp(Path("sinks.npy")) == sinks_before);
  CHECK_FALSE(Exists(Path("bad_dv.npy")));
  CHECK_FALSE(Exists(Path("bad_dsinks.npy")));

  // check and bench make their own slopes and sinks; the softcap is checked there too.
  RequireBadInput("check --b 1 --hq 2 --hkv 1 --nq 8 --nk 8 --d 16 --softcap -1", "--softcap");
  RequireBadInput("bench --b 1 --h 2 --n 64 --d 32 --softcap nan", "--softcap");
  RequireBadInput("bench --b 1 --h 2 --n 64 --d 32 --alibi " + Path("slopes.npy"), "");  // --alibi is a flag there
}

TEST_CASE("CLI check and bench run the score variants with made slopes and sinks", "[cli][bench][softcap][alibi][sinks]") {
  UseFolder("score_variants_made");
  CliResult r = RunCli("check --b 2 --hq 4 --hkv 2 --nq 40 --nk 70 --d 32 --causal --softcap 20 --alibi --sinks --repeats 1");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("softcap=20 alibi sinks") != std::string::npos);
  CHECK(r.out.find("PASS") != std::string::npos);

  r = RunCli("bench --b 1 --h 2 --n 64 --d 32 --causal --softcap 30 --alibi --sinks --runs 3 --warmup 1 --min-time-ms 0 "
             "--json " + Path("bench.json"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("[validation") == std::string::npos);
  CHECK(r.out.find("softcap=30+alibi+sinks") != std::string::npos);
  const std::string json = Slurp(Path("bench.json"));
  for (const char* key : {"\"mode\": \"fwd\"", "\"mode\": \"bwd\"", "\"softcap\": 30.0", "\"alibi\": true", "\"sinks\": true"}) {
    INFO(key);
    CHECK(json.find(key) != std::string::npos);
  }
  CHECK(json.find("naive") == std::string::npos);  // the naive baseline has no score variants
}

TEST_CASE("CLI --mask and --dbias: broadcast masks of each type, and bad ones refused with exit 2", "[cli][mask]") {
  UseFolder("masks");
  WriteTensor("q.npy", DataType::kFloat32, {2, 4, 8, 16}, 1);
  WriteTensor("k.npy", DataType::kFloat32, {2, 2, 10, 16}, 2);
  WriteTensor("do.npy", DataType::kFloat32, {2, 4, 8, 16}, 3);
  WriteFloats("bias.npy", {8, 10}, RandomValues(80, DataType::kFloat32, 4));  // [Nq, Nk]: every batch entry and head
  WriteFloats("bias_f16.npy", {2, 1, 1, 10}, RandomValues(20, DataType::kFloat16, 5), DataType::kFloat16);
  WriteFloats("bias_bad.npy", {3, 10}, std::vector<float>(30, 0.0f));       // 3 rows: neither 8 nor 1
  WriteFloats("bias_5d.npy", {1, 1, 1, 8, 10}, std::vector<float>(80, 0.0f));
  // A boolean padding mask [B, 1, 1, Nk] written as NumPy writes bool: '|b1', one byte each.
  {
    std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 1, 1, 10), }";
    header.resize(117, ' ');
    header += '\n';
    std::ofstream f(Path("keep.npy"), std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const uint16_t length = uint16_t(header.size());
    f.write(reinterpret_cast<const char*>(&length), 2);
    f << header;
    for (int b = 0; b < 2; ++b)
      for (int j = 0; j < 10; ++j) f.put(char(j < 10 - 3 * b ? 1 : 0));  // entry 1's last 3 keys padding
  }
  const std::string io = " --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("k.npy");
  const std::string grads = " --do " + Path("do.npy") + " --dq " + Path("dq.npy") + " --dk " + Path("dk.npy") +
                            " --dv " + Path("dv.npy");

  // Each runs, and O matches the reference with the same mask.
  for (const char* mask : {"bias.npy", "bias_f16.npy", "keep.npy"}) {
    INFO(mask);
    const CliResult r = RunCli("forward" + io + " --out " + Path("o.npy") + " --mask " + Path(mask));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());
  }
  // The last one: a padding mask; entry 1's rows match attention over its first 7 keys alone.
  const std::vector<float> o = ReadFloats("o.npy");
  const std::vector<float> q = ReadFloats("q.npy"), kv = ReadFloats("k.npy");
  AttentionParams one = MakeParams({1, 4, 2, 8, 7, 16}, DataType::kFloat32, false);
  std::vector<float> k_seq;
  for (uint32_t h = 0; h < 2; ++h)
    k_seq.insert(k_seq.end(), kv.begin() + (2 + h) * 10 * 16, kv.begin() + (2 + h) * 10 * 16 + 7 * 16);
  const auto ref = tools::ReferenceAttentionForward(one, std::vector<float>(q.begin() + 4 * 8 * 16, q.end()), k_seq, k_seq);
  CHECK(tools::RelativeError(std::vector<float>(o.begin() + 4 * 8 * 16, o.end()), ref.o) <= 2e-4);

  const CliResult r = RunCli("backward" + io + grads + " --mask " + Path("bias.npy") + " --dbias " + Path("dbias.npy"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto dbias = tools::ReadNpy(Path("dbias.npy"));
  REQUIRE(dbias.ok());
  CHECK(dbias->shape == std::vector<uint64_t>{8, 10});  // the mask's own shape
  CHECK(dbias->dtype == DataType::kFloat32);

  // A 0-d bias broadcasts to every pair, as NumPy's scalars do: O as without it (the softmax does
  // not see a constant), a gradient of 0-d shape (0 in exact arithmetic).
  WriteFloats("bias_0d.npy", {}, {0.75f});
  REQUIRE(RunCli("forward" + io + " --out " + Path("o_plain.npy")).exit_code == 0);
  REQUIRE(RunCli("forward" + io + " --out " + Path("o_scalar.npy") + " --mask " + Path("bias_0d.npy")).exit_code == 0);
  const std::vector<float> o_plain = ReadFloats("o_plain.npy");
  CHECK(tools::RelativeError(ReadFloats("o_scalar.npy"), std::vector<double>(o_plain.begin(), o_plain.end())) <= 2e-6);
  const CliResult scalar = RunCli("backward" + io + grads + " --mask " + Path("bias_0d.npy") + " --dbias " +
                                  Path("dbias_0d.npy"));
  INFO(scalar.err);
  REQUIRE(scalar.exit_code == 0);
  auto dbias_0d = tools::ReadNpy(Path("dbias_0d.npy"));
  REQUIRE(dbias_0d.ok());
  CHECK(dbias_0d->shape.empty());
  CHECK(std::abs(dbias_0d->at(0)) <= 1e-4);

  const std::string out = " --out " + Path("bad_out.npy") + " --lse " + Path("bad_lse.npy");
  RequireBadInput("forward" + io + out + " --mask " + Path("bias_bad.npy"), "does not broadcast to [B, Hq, Nq, Nk] = (2, 4, 8, 10)");
  RequireBadInput("forward" + io + out + " --mask " + Path("bias_5d.npy"), "bias_5d.npy");
  RequireBadInput("forward" + io + out + " --mask " + Path("missing.npy"), "missing.npy");
  const std::string bad_grads = " --do " + Path("do.npy") + " --dq " + Path("bad_out.npy") + " --dk " +
                                Path("bad_lse.npy") + " --dv " + Path("bad_dv.npy");
  RequireBadInput("backward" + io + bad_grads + " --dbias " + Path("bad_dbias.npy"), "--dbias needs --mask");
  RequireBadInput("backward" + io + bad_grads + " --mask " + Path("keep.npy") + " --dbias " + Path("bad_dbias.npy"),
                  "has no gradient");
  RequireBadInput("backward" + io + bad_grads + " --mask " + Path("bias.npy") + " --dbias " + Path("bias.npy"),
                  "also an input");
  CHECK_FALSE(Exists(Path("bad_dv.npy")));
  CHECK_FALSE(Exists(Path("bad_dbias.npy")));

  // check and bench make a bias of their own.
  CliResult made = RunCli("check --b 2 --hq 4 --hkv 2 --nq 40 --nk 70 --d 32 --causal --mask --repeats 1");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  CHECK(made.out.find("mask") != std::string::npos);
  CHECK(made.out.find("PASS") != std::string::npos);
  made = RunCli("bench --b 1 --h 2 --n 64 --d 32 --mask --runs 3 --warmup 1 --min-time-ms 0 --json " + Path("bench.json"));
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  CHECK(made.out.find(" mask ") != std::string::npos);
  CHECK(Slurp(Path("bench.json")).find("\"bias\": true") != std::string::npos);

  // --mask-sparsity closes round(F x blocks) of the bias's 128 x 128 blocks: the kernels skip
  // them and still match the reference, and bench counts FLOPs over the open blocks only.
  made = RunCli("check --b 1 --hq 2 --hkv 1 --nq 300 --nk 270 --d 32 --mask --mask-sparsity 0.5 --repeats 1");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  CHECK(made.out.find("PASS") != std::string::npos);
  made = RunCli("bench --b 1 --h 2 --n 256 --d 32 --mask --mask-sparsity 0.5 --mode fwd --no-naive --runs 3 --warmup 1 "
                "--min-time-ms 0 --json " + Path("sparse.json"));
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  CHECK(made.out.find("mask/closed=0.5") != std::string::npos);
  const nlohmann::json sparse = nlohmann::json::parse(Slurp(Path("sparse.json")));
  REQUIRE(sparse.size() == 1);
  CHECK(sparse[0]["mask_sparsity"].get<double>() == Approx(0.5));
  // 2 of the 4 blocks open: 4 * D FLOPs per pair, 2 heads.
  const double flops = sparse[0]["tflops"].get<double>() * 1e12 * sparse[0]["ms"].get<double>() * 1e-3;
  CHECK(flops == Approx(4.0 * 32 * 2 * 128 * 128 * 2).epsilon(1e-3));
  RequireBadInput("bench --mask-sparsity 0.5", "--mask-sparsity needs --mask");
  RequireBadInput("bench --mask --mask-sparsity 1.5", "--mask-sparsity must be a fraction from 0 to 1");

  // --mask-dtype stores the same bias as float16 or bool (false where it is -inf).
  for (const char* dtype : {"f16", "bool"}) {
    INFO(dtype);
    made = RunCli(std::string("check --b 1 --hq 2 --hkv 1 --nq 70 --nk 45 --d 32 --dtype f16 --mask --mask-dtype ") + dtype +
                  " --repeats 1");
    INFO(made.out << made.err);
    REQUIRE(made.exit_code == 0);
    CHECK(made.out.find("PASS") != std::string::npos);
    made = RunCli(std::string("bench --b 1 --h 2 --n 64 --d 32 --mask --mask-dtype ") + dtype +
                  " --mode fwd --no-naive --runs 3 --warmup 1 --min-time-ms 0 --json " + Path("typed.json"));
    REQUIRE(made.exit_code == 0);
    CHECK(made.out.find(std::string(" mask=") + dtype + " ") != std::string::npos);
    CHECK(nlohmann::json::parse(Slurp(Path("typed.json")))[0]["mask_dtype"] == dtype);
  }
  RequireBadInput("bench --mask-dtype f16", "--mask-dtype needs --mask");
  RequireBadInput("check --mask-dtype f32", "--mask-dtype needs --mask");
  RequireBadInput("bench --mask --mask-dtype f64", "--mask-dtype");
}

TEST_CASE("CLI bench times forward and backward and writes JSON rows", "[cli][bench]") {
  UseFolder("bench");
  const CliResult r = RunCli("bench --b 1 --h 2 --n 64 --d 32 --causal --runs 3 --warmup 1 --json " + Path("bench.json"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("[validation") == std::string::npos);
  const std::string json = Slurp(Path("bench.json"));
  for (const char* key : {"\"mode\": \"fwd\"", "\"mode\": \"bwd\"", "\"tflops\"", "\"ms\"", "\"N\": 64", "\"causal\": true",
                          "\"kernel\": \"naive (S, softmax, PV)\""}) {
    INFO(key);
    CHECK(json.find(key) != std::string::npos);
  }
  CHECK(json.find("\"ms\": 0,") == std::string::npos);  // timestamps measured something

  // Without a minimum time, one batch of --runs is timed, and the row says so.
  const CliResult single = RunCli("bench --b 1 --h 2 --n 64 --d 32 --mode fwd --no-naive --runs 3 --warmup 1 "
                                  "--min-time-ms 0 --json " + Path("single.json"));
  INFO(single.err);
  REQUIRE(single.exit_code == 0);
  const std::string single_json = Slurp(Path("single.json"));
  CHECK(single_json.find("\"runs\": 3") != std::string::npos);
  CHECK(single_json.find("\"mode\": \"bwd\"") == std::string::npos);
  CHECK(RunCli("bench --min-time-ms -1").exit_code == 2);
}

TEST_CASE("CLI refuses directories, devices and overflowing shapes as inputs, with exit 2", "[cli]") {
  UseFolder("inputs");
  WriteTensor("k.npy", DataType::kFloat32, {1, 1, 8, 16}, 2);
  const std::string kv = " --k " + Path("k.npy") + " --v " + Path("k.npy");
  const std::string out = " --out " + Path("bad_out.npy") + " --lse " + Path("bad_lse.npy");
  RequireBadInput("forward --q " + g_dir + kv + out, "directory");
  RequireBadInput("forward --q /dev/zero" + kv + out, "not a regular file");
  {
    // 2^30 x 2^16 x 2^16 x 64 elements wrap around to 0 in 64 bits: a file with no data matched it.
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 65536, 65536, 64), }";
    while ((10 + dict.size() + 1) % 64) dict += ' ';
    std::ofstream f(Path("huge.npy"), std::ios::binary);
    f << std::string("\x93NUMPY\x01\x00", 8) << char(dict.size() + 1) << char(0) << dict << '\n';
  }
  RequireBadInput("forward --q " + Path("huge.npy") + kv + out, "more elements than can be addressed");
}

TEST_CASE("CLI writes all outputs or none, and never over an input", "[cli]") {
  UseFolder("all_or_nothing");
  WriteTensor("q.npy", DataType::kFloat32, {1, 2, 8, 16}, 1);
  WriteTensor("k.npy", DataType::kFloat32, {1, 2, 8, 16}, 2);
  WriteTensor("do.npy", DataType::kFloat32, {1, 2, 8, 16}, 3);
  ::mkdir(Path("a_folder").c_str(), 0755);
  const std::string io = " --q " + Path("q.npy") + " --k " + Path("k.npy") + " --v " + Path("k.npy");
  auto keep = [&](const std::string& name) {
    std::ofstream f(Path(name));
    f << "previous " << name;
  };
  auto kept = [&](const std::string& name) { return Slurp(Path(name)) == "previous " + name; };

  // The LSE destination is a folder: O must not be written either (here: an older O stays as it was).
  keep("o.npy");
  CliResult r = RunCli("forward" + io + " --out " + Path("o.npy") + " --lse " + Path("a_folder"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("directory") != std::string::npos);
  CHECK(kept("o.npy"));
  // The same for the backward's dV: dQ and dK stay unwritten.
  std::remove(Path("dq.npy").c_str());
  keep("dk.npy");
  r = RunCli("backward" + io + " --do " + Path("do.npy") + " --dq " + Path("dq.npy") + " --dk " + Path("dk.npy") +
             " --dv " + Path("a_folder"));
  CHECK(r.exit_code == 2);
  CHECK_FALSE(Exists(Path("dq.npy")));
  CHECK(kept("dk.npy"));
  // An output that is one of the inputs is refused; the input stays intact.
  const std::string q_before = Slurp(Path("q.npy"));
  r = RunCli("forward" + io + " --out " + Path("q.npy"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("also an input") != std::string::npos);
  CHECK(Slurp(Path("q.npy")) == q_before);
  r = RunCli("forward" + io + " --out " + Path("./k.npy"));  // another spelling of an input
  CHECK(r.exit_code == 2);
  // A folder as --out, and a missing folder: named plainly, no temporary file names.
  r = RunCli("forward" + io + " --out " + Path("a_folder"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("is a directory") != std::string::npos);
  r = RunCli("forward" + io + " --out " + Path("missing_folder/o.npy"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("the folder '" + Path("missing_folder") + "' does not exist") != std::string::npos);
  CHECK(r.err.find(".tmp") == std::string::npos);
  // Two outputs to one file, spelled differently.
  r = RunCli("forward" + io + " --out " + Path("o2.npy") + " --lse " + g_dir + "//o2.npy");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("same file") != std::string::npos);
  // Nothing was left behind in the folder: no temporary files.
  r = RunCli("forward" + io + " --out " + Path("o.npy") + " --lse " + Path("lse.npy"));
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(kept("o.npy"));
  for (const auto& entry : std::filesystem::directory_iterator(g_dir)) {
    INFO(entry.path().string());
    CHECK(entry.path().filename().string().find(".vkflash-") == std::string::npos);
  }
}

TEST_CASE("CLI --version prints the version", "[cli]") {
  UseFolder("version");
  const CliResult r = RunCli("--version");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("vkflash " VKFLASH_VERSION) != std::string::npos);
}

TEST_CASE("CLI exit codes: bad input, unsupported calls and out-of-memory exit 2, device failures 1", "[cli]") {
  using vkflash::cli::ReportError;
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kUnsupported, ErrorCode::kDeviceNotFound,
                         ErrorCode::kIo, ErrorCode::kOutOfMemory}) {
    CHECK(ReportError(Status::Error(code, "test")) == 2);
  }
  CHECK(ReportError(Status::Error(ErrorCode::kVulkan, "test", VK_ERROR_DEVICE_LOST)) == 1);
}

