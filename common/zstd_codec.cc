#include "common/zstd_codec.h"

#include <zstd.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace podprof {
namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// The content size `frame`'s header declares; DataLoss naming `what` when it is not a zstd
// frame's header or declares more than `max_bytes`.
absl::StatusOr<uint64_t> ContentSize(absl::string_view frame, uint64_t max_bytes,
                                     absl::string_view what) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return absl::DataLossError(absl::StrCat(what, " is not a zstd frame"));
  }
  if (size > max_bytes) {
    return absl::DataLossError(
        absl::StrCat(what, " claims ", size, " bytes, more than ", max_bytes));
  }
  return size;
}

}  // namespace

std::string ZstdCompress(absl::string_view raw, int level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> ctx(ZSTD_createCCtx());
  // Compressed into a buffer kept per thread, then copied out at its size: a fresh buffer of
  // the worst-case size per call would be zero-filled and faulted in only to be cut back.
  thread_local std::string scratch;
  const size_t bound = ZSTD_compressBound(raw.size());
  if (scratch.size() < bound) scratch.resize(bound);
  const size_t n =
      ZSTD_compressCCtx(ctx.get(), scratch.data(), bound, raw.data(), raw.size(), level);
  if (ZSTD_isError(n)) return std::string();
  std::string out(scratch.data(), n);
  // A very large block leaves no very large buffer behind it.
  if (scratch.size() > (16u << 20)) std::string().swap(scratch);
  return out;
}

absl::StatusOr<std::string> ZstdDecompress(absl::string_view frame, uint64_t max_bytes,
                                           absl::string_view what) {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  absl::StatusOr<uint64_t> size = ContentSize(frame, max_bytes, what);
  if (!size.ok()) return size.status();
  std::string out(*size, '\0');
  const size_t n =
      ZSTD_decompressDCtx(ctx.get(), out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) return absl::DataLossError(absl::StrCat(what, ": ", ZSTD_getErrorName(n)));
  return out;
}

absl::StatusOr<std::string> ZstdDecompressPrefix(absl::string_view frame, size_t n,
                                                 absl::string_view what) {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  // A stream stopped early: the context may hold a half-read frame from the last call.
  ZSTD_DCtx_reset(ctx.get(), ZSTD_reset_session_only);
  std::string out(n, '\0');
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  while (o.pos < o.size) {
    const size_t before_in = in.pos, before_out = o.pos;
    const size_t r = ZSTD_decompressStream(ctx.get(), &o, &in);
    if (ZSTD_isError(r)) return absl::DataLossError(absl::StrCat(what, ": ", ZSTD_getErrorName(r)));
    // The frame ended, or it is cut short and nothing more comes out.
    if (r == 0 || (in.pos == before_in && o.pos == before_out)) break;
  }
  out.resize(o.pos);
  return out;
}

absl::Status ZstdCheckFrame(absl::string_view frame, uint64_t max_bytes, absl::string_view what) {
  if (absl::StatusOr<uint64_t> size = ContentSize(frame, max_bytes, what); !size.ok()) {
    return size.status();
  }
  const size_t whole = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(whole) || whole != frame.size()) {
    return absl::DataLossError(absl::StrCat(what, " is not one whole zstd frame"));
  }
  return absl::OkStatus();
}

}  // namespace podprof
