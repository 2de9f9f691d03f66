// Bad calls get a clear error code and message, never a crash or a silent wrong answer.
#include <catch2/catch.hpp>

#include <cmath>

#include "support/validated_context.h"

using namespace vkflash;
using namespace vkflash::testing;

namespace {

struct Tensors {
  Buffer q, k, v, o, lse;
  ForwardBuffers views() const { return {q.view(), k.view(), v.view(), o.view(), lse.view()}; }
};

Tensors MakeTensors(Context& context, const AttentionParams& p) {
  const uint64_t e = DataTypeSize(p.dtype);
  auto make = [&](uint64_t bytes) {
    auto b = context.CreateBuffer(bytes);
    REQUIRE(b.ok());
    return std::move(b).value();
  };
  return {make(p.shape.q_elements() * e), make(p.shape.kv_elements() * e), make(p.shape.kv_elements() * e),
          make(p.shape.q_elements() * e), make(p.shape.lse_elements() * 4)};
}

AttentionParams Valid() {
  AttentionParams p;
  p.shape = {1, 4, 2, 16, 16, 32};
  return p;
}

}  // namespace

TEST_CASE("invalid parameters are refused before anything runs", "[errors]") {
  Context& context = SharedContext(Knobs::kDevice);
  Tensors t = MakeTensors(context, Valid());

  AttentionParams p = Valid();
  p.shape.q_heads = 3;  // not a multiple of kv_heads = 2
  Status s = context.Forward(p, t.views());
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("multiple") != std::string::npos);

  p = Valid();
  p.shape.head_dim = 300;
  CHECK(context.Forward(p, t.views()).code() == ErrorCode::kUnsupported);
  p.shape.head_dim = 0;
  CHECK(context.Forward(p, t.views()).code() == ErrorCode::kUnsupported);

  p = Valid();
  p.shape.kv_heads = 0;
  CHECK(context.Forward(p, t.views()).code() == ErrorCode::kInvalidArgument);

  // Element counts that do not fit in 64 bits used to wrap around to small numbers and pass.
  p = Valid();
  p.shape = {5, 107367629, 107367629, 536903681, 536903681, 64};
  CHECK(p.shape.q_elements() == UINT64_MAX);
  CHECK(ValidateAttentionParams(p).code() == ErrorCode::kUnsupported);
  p.shape = {4294967295u, 4294967295u, 4294967295u, 4294967295u, 4294967295u, 256};
  CHECK(ValidateAttentionParams(p).code() == ErrorCode::kUnsupported);
  p.shape.batch = 0;  // a zero factor makes any shape empty
  CHECK(p.shape.q_elements() == 0);

  p = Valid();
  p.scale = NAN;
  CHECK(context.Forward(p, t.views()).code() == ErrorCode::kInvalidArgument);
  p.scale = INFINITY;
  CHECK(context.Forward(p, t.views()).code() == ErrorCode::kInvalidArgument);
  RequireNoValidationMessages();
}

TEST_CASE("buffers that are too small, null, misaligned or overlapping are refused", "[errors]") {
  Context& context = SharedContext(Knobs::kDevice);
  const AttentionParams p = Valid();
  Tensors t = MakeTensors(context, p);

  ForwardBuffers b = t.views();
  b.k.size -= 4;
  Status s = context.Forward(p, b);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("'k'") != std::string::npos);

  b = t.views();
  b.o.buffer = VK_NULL_HANDLE;
  CHECK(context.Forward(p, b).code() == ErrorCode::kInvalidArgument);

  b = t.views();
  b.o = b.q;  // in place: other workgroups would read Q rows already overwritten
  s = context.Forward(p, b);
  CHECK(s.code() == ErrorCode::kInvalidArgument);
  CHECK(s.message().find("overlap") != std::string::npos);

  b = t.views();
  b.lse = b.o;
  CHECK(context.Forward(p, b).code() == ErrorCode::kInvalidArgument);

  const VkDeviceSize align = context.device_info().min_storage_buffer_offset_alignment;
  if (align > 1) {
    b = t.views();
    b.q.offset = 1;
    CHECK(context.Forward(p, b).code() == ErrorCode::kInvalidArgument);
  }
  CHECK(context.RecordForward(VK_NULL_HANDLE, p, t.views()).code() == ErrorCode::kInvalidArgument);
  RequireNoValidationMessages();
}

TEST_CASE("transfers and buffers check their sizes", "[errors]") {
  Context& context = SharedContext(Knobs::kDevice);
  CHECK(context.CreateBuffer(0).status().code() == ErrorCode::kInvalidArgument);
  // More than any device holds: a clean kOutOfMemory, not a validation error or a crash.
  const auto huge = context.CreateBuffer(uint64_t(1) << 52);
  CHECK(huge.status().code() == ErrorCode::kOutOfMemory);
  CHECK(huge.status().message().find(std::to_string(uint64_t(1) << 52)) != std::string::npos);
  auto buffer = context.CreateBuffer(16);
  REQUIRE(buffer.ok());
  float data[8] = {};
  CHECK(context.Upload(buffer->view(), data, sizeof(data)).code() == ErrorCode::kInvalidArgument);
  CHECK(context.Download(buffer->view(), data, sizeof(data)).code() == ErrorCode::kInvalidArgument);
  CHECK(context.Upload({}, data, 4).code() == ErrorCode::kInvalidArgument);
  RequireNoValidationMessages();
}

TEST_CASE("an empty query set is a no-op", "[errors]") {
  Context& context = SharedContext(Knobs::kDevice);
  AttentionParams p = Valid();
  p.shape.q_len = 0;
  CHECK(context.Forward(p, {}).ok());
  p = Valid();
  p.shape.batch = 0;
  CHECK(context.Forward(p, {}).ok());
  RequireNoValidationMessages();
}

TEST_CASE("device selection by index and by name, and clear errors for no match", "[device]") {
  auto devices = EnumerateDevices();
  REQUIRE(devices.ok());
  REQUIRE_FALSE(devices->empty());

  ContextOptions options = ValidatedOptions();
  options.device_selector = "0";
  auto by_index = Context::Create(options);
  REQUIRE(by_index.ok());
  CHECK((*by_index)->device_info().index == 0);

  options.device_selector = (*devices)[0].name.substr(0, 4);
  auto by_name = Context::Create(options);
  REQUIRE(by_name.ok());
  CHECK((*by_name)->device_info().name == (*devices)[0].name);

  // SelectDeviceIndex names the device Context::Create picks, without creating one.
  auto chosen = SelectDeviceIndex();
  REQUIRE(chosen.ok());
  options.device_selector = "";
  auto created = Context::Create(options);
  REQUIRE(created.ok());
  CHECK(*chosen == (*created)->device_info().index);
  CHECK(*SelectDeviceIndex("0") == 0);
  CHECK(SelectDeviceIndex("no-such-gpu-anywhere").status().code() == ErrorCode::kDeviceNotFound);

  options.device_selector = "99";
  CHECK(Context::Create(options).status().code() == ErrorCode::kDeviceNotFound);
  options.device_selector = "no-such-gpu-anywhere";
  auto none = Context::Create(options);
  CHECK(none.status().code() == ErrorCode::kDeviceNotFound);
  CHECK(none.status().message().find((*devices)[0].name) != std::string::npos);  // lists the devices
  RequireNoValidationMessages();
}
