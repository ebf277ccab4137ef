/* libFuzzer target: the calibration cache reader (docs/CALIBRATION.md) on
 * arbitrary bytes; whatever it accepts must write back to a text that reads
 * again to the same table and writes the same text. */
#include "quant/calibration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn_error err;
  kn_calibration *c, *again;
  if (kn_calibration_parse((const char *)data, size, "fuzz.calib", &c, &err) != KN_OK) {
    if (!memchr(err.msg, 0, sizeof err.msg) || strchr(err.msg, '\n')) abort();
    return 0;
  }
  char *text = kn_calibration_to_text(c);
  if (!text) abort();
  if (kn_calibration_parse(text, strlen(text), "again.calib", &again, &err) != KN_OK) abort();
  char *text2 = kn_calibration_to_text(again);
  if (!text2 || strcmp(text, text2) || kn_calibration_count(again) != kn_calibration_count(c))
    abort();
  for (int32_t i = 0; i < kn_calibration_count(c); i++) {
    kn_calib_range a, b;
    if (kn_calibration_entry(c, i, &a) || kn_calibration_get(again, a.name, &b) != 1 ||
        memcmp(&a.amax, &b.amax, sizeof a.amax) || memcmp(&a.min, &b.min, sizeof a.min) ||
        memcmp(&a.max, &b.max, sizeof a.max))
      abort();
  }
  free(text);
  free(text2);
  kn_calibration_free(again);
  kn_calibration_free(c);
  return 0;
}
