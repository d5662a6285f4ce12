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

// Where the first block of `frame` ends (RFC 8878 section 3.1.1: the frame header, then each
// block's 3-byte header and its content), or 0 when the bytes do not hold that much.
size_t FirstBlockEnd(absl::string_view frame) {
  constexpr size_t kMagic = 4, kBlockHeader = 3;
  if (frame.size() < kMagic + 1) return 0;
  const uint8_t descriptor = static_cast<uint8_t>(frame[kMagic]);
  const bool single_segment = descriptor & 0x20;
  constexpr size_t kDictIdBytes[] = {0, 1, 2, 4};
  constexpr size_t kContentSizeBytes[] = {0, 2, 4, 8};
  size_t content_size_bytes = kContentSizeBytes[descriptor >> 6];
  if (descriptor >> 6 == 0 && single_segment) content_size_bytes = 1;
  const size_t header =
      kMagic + 1 + (single_segment ? 0 : 1) + kDictIdBytes[descriptor & 3] + content_size_bytes;
  if (frame.size() < header + kBlockHeader) return 0;
  const auto* b = reinterpret_cast<const uint8_t*>(frame.data() + header);
  const uint32_t block = b[0] | (b[1] << 8) | (static_cast<uint32_t>(b[2]) << 16);
  const uint32_t type = (block >> 1) & 3, size = block >> 3;
  constexpr uint32_t kRle = 1;
  const size_t end = header + kBlockHeader + (type == kRle ? 1 : size);
  return end <= frame.size() ? end : 0;
}

}  // namespace

std::string ZstdCompress(absl::string_view raw, int level, size_t front) {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> ctx(ZSTD_createCCtx());
  // Compressed into a buffer kept per thread, then copied out at its size: a fresh buffer of
  // the worst-case size per call would be zero-filled and faulted in only to be cut back.
  thread_local std::string scratch;
  // A front of its own can cost its block's header and its bytes stored raw.
  const size_t bound = ZSTD_compressBound(raw.size()) + (front > 0 ? ZSTD_compressBound(front) : 0);
  if (scratch.size() < bound) scratch.resize(bound);
  size_t n = 0;
  if (front == 0 || front >= raw.size()) {
    n = ZSTD_compressCCtx(ctx.get(), scratch.data(), bound, raw.data(), raw.size(), level);
    if (ZSTD_isError(n)) return std::string();
  } else {
    // The front flushed as a block of its own: ZstdDecompressPrefix then decodes only it.
    ZSTD_CCtx_reset(ctx.get(), ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setPledgedSrcSize(ctx.get(), raw.size());
    ZSTD_outBuffer out{scratch.data(), bound, 0};
    ZSTD_inBuffer head{raw.data(), front, 0};
    size_t left = ZSTD_compressStream2(ctx.get(), &out, &head, ZSTD_e_flush);
    if (ZSTD_isError(left) || left != 0) return std::string();
    ZSTD_inBuffer rest{raw.data() + front, raw.size() - front, 0};
    do {
      left = ZSTD_compressStream2(ctx.get(), &out, &rest, ZSTD_e_end);
      if (ZSTD_isError(left)) return std::string();
    } while (left != 0 && out.pos < out.size);
    if (left != 0) return std::string();
    n = out.pos;
  }
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
  // Given the whole frame, the decoder would go on to decode the next block into its own
  // buffer once the first filled `out`; given only the frame's header and first block, it
  // stops there. A frame it cannot cut is read as a whole.
  const size_t first = FirstBlockEnd(frame);
  ZSTD_inBuffer in{frame.data(), first > 0 ? first : frame.size(), 0};
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

absl::StatusOr<uint64_t> ZstdCheckedContentSize(absl::string_view frame, uint64_t max_bytes,
                                                absl::string_view what) {
  absl::StatusOr<uint64_t> size = ContentSize(frame, max_bytes, what);
  if (!size.ok()) return size.status();
  const size_t whole = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(whole) || whole != frame.size()) {
    return absl::DataLossError(absl::StrCat(what, " is not one whole zstd frame"));
  }
  return size;
}

absl::Status ZstdCheckFrame(absl::string_view frame, uint64_t max_bytes, absl::string_view what) {
  return ZstdCheckedContentSize(frame, max_bytes, what).status();
}

}  // namespace podprof
