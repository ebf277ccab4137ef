#!/usr/bin/python3
"""Compare two sets of ONNX output tensors (output_<i>.pb, TensorProto).

    /usr/bin/python3 scripts/compare_outputs.py ACTUAL REFERENCE [--rtol R] [--atol A]

ACTUAL and REFERENCE are folders holding output_<i>.pb (or two .pb files).
For every output it prints max abs error, max rel error, cosine similarity and
the worst element.  The check is numpy.isclose-like, with the reference as b:
an element fails when |a - b| > atol + rtol * |b| (defaults rtol 1e-3,
atol 1e-4), or when exactly one of them is NaN, or when infinities differ.
Max rel error is max |a - b| / max(|b|, atol), so near-zero reference values
do not blow it up.

Exit status: 0 all outputs within tolerance, 1 some mismatch (values, shape,
dtype, or a different number of outputs), 2 usage / unreadable files.
"""

import argparse
import os
import re
import sys

import numpy as np

try:
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit("compare_outputs.py: %s (run with /usr/bin/python3; apt-get install "
             "python3-onnx python3-numpy)" % e)


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def list_outputs(d):
    if os.path.isfile(d):
        return {0: d}
    out = {}
    for f in os.listdir(d):
        m = re.match(r"^output_(\d+)\.pb$", f)
        if m:
            out[int(m.group(1))] = os.path.join(d, f)
    return out


def compare(a, b, rtol, atol):
    """Returns (ok, stats dict)."""
    st = {}
    if a.shape != b.shape:
        return False, {"error": "shape %s vs %s" % (a.shape, b.shape)}
    if a.dtype != b.dtype:
        st["dtype_note"] = "dtype %s vs %s" % (a.dtype, b.dtype)
    if a.size == 0:
        return "dtype_note" not in st, st
    if a.dtype == bool or b.dtype == bool:
        diff = a.astype(bool) != b.astype(bool)
        st.update(max_abs=float(diff.any()), max_rel=float(diff.any()), cos=float("nan"),
                  n_bad=int(diff.sum()), n=int(a.size))
        return (not diff.any()) and "dtype_note" not in st, st
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    inf_mismatch = (np.isinf(a64) | np.isinf(b64)) & (a64 != b64)
    finite = ~(nan_a | nan_b | np.isinf(a64) | np.isinf(b64))
    err = np.zeros(a.shape, np.float64)
    err[finite] = np.abs(a64[finite] - b64[finite])
    bad = (err > atol + rtol * np.abs(np.where(finite, b64, 0.0))) | (nan_a != nan_b) | inf_mismatch
    rel = err / np.maximum(np.abs(np.where(finite, b64, 0.0)), atol if atol > 0 else 1e-30)
    af, bf = a64[finite].ravel(), b64[finite].ravel()
    na, nb = np.linalg.norm(af), np.linalg.norm(bf)
    if na == 0 and nb == 0:
        cos = 1.0
    elif na == 0 or nb == 0:
        cos = 0.0
    else:
        cos = float(np.dot(af, bf) / (na * nb))
    worst = int(np.argmax(err)) if err.size else 0
    idx = np.unravel_index(worst, a.shape)
    st.update(max_abs=float(err.max()), max_rel=float(rel.max()), cos=cos,
              n_bad=int(bad.sum()), n=int(a.size),
              nan_a=int(nan_a.sum()), nan_b=int(nan_b.sum()),
              worst_index=tuple(int(i) for i in idx),
              worst_a=float(a64[idx]), worst_b=float(b64[idx]),
              ref_absmax=float(np.abs(bf).max()) if bf.size else 0.0)
    ok = not bad.any() and "dtype_note" not in st
    return ok, st


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("actual", help="folder with output_<i>.pb (or one .pb file)")
    ap.add_argument("reference", help="folder with the reference output_<i>.pb (or one .pb)")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("-q", "--quiet", action="store_true", help="print only failures and the verdict")
    a = ap.parse_args()

    for d in (a.actual, a.reference):
        if not os.path.exists(d):
            print("compare_outputs.py: not found: %s" % d, file=sys.stderr)
            return 2
    fa, fb = list_outputs(a.actual), list_outputs(a.reference)
    if not fb:
        print("compare_outputs.py: no output_<i>.pb in %s" % a.reference, file=sys.stderr)
        return 2
    all_ok = True
    if sorted(fa) != sorted(fb):
        print("FAIL output count: %s has %s, %s has %s"
              % (a.actual, sorted(fa), a.reference, sorted(fb)))
        all_ok = False
    for i in sorted(set(fa) & set(fb)):
        try:
            na, xa = load_pb(fa[i])
            nb, xb = load_pb(fb[i])
        except Exception as e:  # noqa: BLE001
            print("compare_outputs.py: cannot read output_%d: %s" % (i, e), file=sys.stderr)
            return 2
        ok, st = compare(xa, xb, a.rtol, a.atol)
        all_ok &= ok
        label = "output_%d %s" % (i, nb or na)
        if "error" in st:
            print("FAIL %s: %s" % (label, st["error"]))
            continue
        if ok and a.quiet:
            continue
        shape = "x".join(str(s) for s in xb.shape) or "scalar"
        line = ("%s %s %s %s: max_abs %.3g max_rel %.3g cos %.9f"
                % ("ok  " if ok else "FAIL", label, xb.dtype, shape,
                   st.get("max_abs", 0.0), st.get("max_rel", 0.0), st.get("cos", float("nan"))))
        if st.get("n_bad"):
            line += "  bad %d/%d" % (st["n_bad"], st["n"])
        if "worst_index" in st and not ok:
            line += "  worst at %s: %.7g vs %.7g" % (list(st["worst_index"]), st["worst_a"], st["worst_b"])
        if st.get("nan_a") or st.get("nan_b"):
            line += "  NaNs %d vs %d" % (st["nan_a"], st["nan_b"])
        if "dtype_note" in st:
            line += "  (%s)" % st["dtype_note"]
        print(line)
    print("%s (rtol %g, atol %g)" % ("PASS" if all_ok else "FAIL", a.rtol, a.atol))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
