// The value of one hexadecimal digit (either case), or -1. Shared by the SigV4
// percent-decoder and the DynamoDB JSON text decoder's \u escapes.
#pragma once

namespace outbox::util {

constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace outbox::util
