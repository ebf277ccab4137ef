#!/usr/bin/python3
"""Top-1 accuracy of a kiln model or engine on labelled samples.

    scripts/eval_accuracy.py KILN MODEL DATA [--labels FILE] [--info FILE]
                             [--batch B] [--reference] [--threads N] [--jobs J]
                             [--output I] [--max-diff POINTS] [--min-accuracy PCT]
                             [--build-arg ARG]... [--json]

KILN is the kiln binary, MODEL an ONNX model or an engine from `kiln build`,
DATA a folder with one sub-folder per sample (input_<i>.pb, batch 1: the
layout `kiln validate --data` reads, in natural order) and labels.txt, one
integer per line, line k for the k-th sample.  scripts/train_models.py makes
<cache>/<name>/heldout and <cache>/<name>/calib in this layout.

An ONNX MODEL is built into an engine once (`kiln build`, in a temporary
folder, for batch 1, or --batch B), then every sample is run through it
(`kiln run ENGINE --input-dir SAMPLE`, one process per sample, --jobs at a
time).  With --batch B, B samples are stacked into one input and run at once
(the engine is built with --profile NAME=1x..:Bx..:Bx..).  --reference runs
the ONNX model unoptimized (`kiln run --no-optimize`) instead of an engine.
--build-arg ARG passes ARG to that `kiln build` (repeatable), e.g.
`--build-arg=--precision --build-arg=int8 --build-arg=--calibration
--build-arg=CALIB`: the accuracy of a reduced-precision engine.
The prediction is the argmax of output I (default 0) over its last axis.

It prints kiln's accuracy and, when info.json is found (--info, default
DATA/../info.json, as train_models.py writes it), PyTorch's fp32 accuracy on
the same samples and the difference in points; with DATA/torch_outputs.npy
also how many predictions agree with PyTorch's and the largest difference of
any logit.  --max-diff POINTS exits 1 when |kiln - PyTorch| exceeds POINTS;
--min-accuracy PCT exits 1 below PCT.  --json prints one JSON object instead.
Exit 2 on a usage error or unreadable data, 1 when kiln fails or a limit does.
Needs only the standard library and numpy.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

# onnx.TensorProto.DataType -> numpy dtype, for the types a sample can have.
PB_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16,
             6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64,
             12: np.uint32, 13: np.uint64}


class DataError(Exception):
    pass


def _varint(buf, i):
    v = shift = 0
    while True:
        if i >= len(buf):
            raise DataError("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, i
        shift += 7


def read_tensor_pb(path):
    """(name, numpy array) of a serialized onnx.TensorProto: dims, data_type,
    name, and raw_data or float_data / int32_data / int64_data / double_data."""
    with open(path, "rb") as f:
        buf = f.read()
    dims, dtype, name, raw = [], 1, "", None
    typed = {4: [], 5: [], 7: [], 10: []}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            if field == 1:
                dims.append(v - (1 << 64) if v >= 1 << 63 else v)
            elif field == 2:
                dtype = v
            elif field in (5, 7):
                typed[field].append(v)
        elif wire == 2:
            n, i = _varint(buf, i)
            chunk = buf[i:i + n]
            if len(chunk) != n:
                raise DataError("%s: truncated field %d" % (path, field))
            i += n
            if field == 1 or field in (5, 7):   # packed varints
                j = 0
                while j < n:
                    v, j = _varint(chunk, j)
                    if field == 1:
                        dims.append(v - (1 << 64) if v >= 1 << 63 else v)
                    else:
                        typed[field].append(v)
            elif field == 4:
                typed[4].extend(struct.unpack("<%df" % (n // 4), chunk))
            elif field == 10:
                typed[10].extend(struct.unpack("<%dd" % (n // 8), chunk))
            elif field == 8:
                name = chunk.decode("utf-8", "replace")
            elif field == 9:
                raw = chunk
        elif wire == 5:
            if field == 4:
                typed[4].append(struct.unpack("<f", buf[i:i + 4])[0])
            i += 4
        elif wire == 1:
            if field == 10:
                typed[10].append(struct.unpack("<d", buf[i:i + 8])[0])
            i += 8
        else:
            raise DataError("%s: unsupported protobuf wire type %d" % (path, wire))
    if dtype not in PB_DTYPES:
        raise DataError("%s: unsupported data_type %d" % (path, dtype))
    dt = np.dtype(PB_DTYPES[dtype])
    if raw is not None:
        arr = np.frombuffer(raw, dtype=dt.newbyteorder("<")).astype(dt)
    elif dt == np.float32:
        arr = np.array(typed[4], dtype=dt)
    elif dt == np.float64:
        arr = np.array(typed[10], dtype=dt)
    elif dt in (np.int64, np.uint32, np.uint64):
        arr = np.array([v - (1 << 64) if dt == np.int64 and v >= 1 << 63 else v
                        for v in typed[7]], dtype=dt)
    else:
        arr = np.array(typed[5], dtype=np.int64).astype(dt)
    count = int(np.prod(dims)) if dims else 1
    if arr.size != count:
        raise DataError("%s: %d values for dims %s" % (path, arr.size, dims))
    return name, arr.reshape(dims)


def natural_key(s):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def list_samples(data):
    """Sub-folders of DATA that hold an input_0 (.pb or .npy), natural order."""
    try:
        names = sorted(os.listdir(data), key=natural_key)
    except OSError as e:
        raise DataError("%s: %s" % (data, e.strerror))
    out = [os.path.join(data, n) for n in names
           if os.path.isfile(os.path.join(data, n, "input_0.pb"))]
    if not out:
        raise DataError("%s: no sample folders with an input_0.pb" % data)
    return out


def read_labels(path, n):
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        labels = np.array([int(v) for v in lines], dtype=np.int64)
    except (OSError, ValueError) as e:
        raise DataError("%s: %s" % (path, e))
    if len(labels) != n:
        raise DataError("%s: %d labels for %d samples" % (path, len(labels), n))
    return labels


def is_engine(path):
    with open(path, "rb") as f:
        return f.read(8) == b"KILNENG\0"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                                r.stderr.strip() or r.stdout.strip()))
    return r.stdout


def dims_str(shape):
    return "x".join(str(d) for d in shape)


def evaluate(a):
    samples = list_samples(a.data)
    labels = read_labels(a.labels or os.path.join(a.data, "labels.txt"), len(samples))
    # input_<i>.pb of the first sample give the names and per-sample shapes
    first = []
    i = 0
    while os.path.isfile(os.path.join(samples[0], "input_%d.pb" % i)):
        first.append(read_tensor_pb(os.path.join(samples[0], "input_%d.pb" % i)))
        i += 1
    for name, arr in first:
        if not arr.ndim or arr.shape[0] != 1:
            raise DataError("%s: input '%s' has dims %s, expected a batch of 1"
                            % (samples[0], name, dims_str(arr.shape)))
    engine_given = is_engine(a.model)
    if a.reference and engine_given:
        raise DataError("--reference runs an ONNX model, %s is an engine" % a.model)
    if a.batch > 1 and engine_given:
        raise DataError("--batch builds its own engine: give the ONNX model, not %s" % a.model)

    tmp = tempfile.mkdtemp(prefix="kiln_eval.")
    try:
        t0 = time.time()
        how = ""
        target = a.model
        if a.reference:
            how = "the ONNX model unoptimized (kiln run --no-optimize)"
        elif engine_given:
            how = "the engine"
        else:
            target = os.path.join(tmp, "model.kiln")
            cmd = [a.kiln, "build", a.model, "-o", target]
            for name, arr in first:
                rest = dims_str(arr.shape[1:])
                if a.batch > 1:
                    cmd += ["--profile", "%s=1x%s:%dx%s:%dx%s" % (name, rest, a.batch, rest,
                                                                  a.batch, rest)]
                else:
                    cmd += ["--shape", "%s=%s" % (name, dims_str(arr.shape))]
            cmd += a.build_arg
            run(cmd)
            how = "an engine built once (%s)" % " ".join(["kiln build MODEL -o ENGINE"] + cmd[5:])
        t_build = time.time() - t0
        threads = ["--threads", str(a.threads)]

        def run_one(k):
            out = os.path.join(tmp, "out_%d" % k)
            cmd = [a.kiln, "run", target, "--input-dir", samples[k], "--output-dir", out,
                   "--output-format", "npy"] + threads
            if a.reference:
                cmd.append("--no-optimize")
            run(cmd)
            o = np.load(os.path.join(out, "output_%d.npy" % a.output))
            shutil.rmtree(out)
            return o.reshape(-1, o.shape[-1])[0]

        def run_batch(lo):
            hi = min(lo + a.batch, len(samples))
            out = os.path.join(tmp, "out_%d" % lo)
            cmd = [a.kiln, "run", target, "--output-dir", out, "--output-format", "npy"]
            cmd += threads
            for i, (name, _) in enumerate(first):
                stacked = np.concatenate(
                    [read_tensor_pb(os.path.join(samples[k], "input_%d.pb" % i))[1]
                     for k in range(lo, hi)])
                path = os.path.join(tmp, "in_%d_%d.npy" % (lo, i))
                np.save(path, stacked)
                cmd += ["--input", "%s=%s" % (name, path)]
            run(cmd)
            o = np.load(os.path.join(out, "output_%d.npy" % a.output))
            shutil.rmtree(out)
            return o.reshape(hi - lo, -1)

        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            if a.batch > 1:
                parts = list(ex.map(run_batch, range(0, len(samples), a.batch)))
            else:
                parts = [p[None] for p in ex.map(run_one, range(len(samples)))]
        logits = np.concatenate(parts).astype(np.float64)
        t_run = time.time() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    pred = logits.argmax(1)
    correct = int((pred == labels).sum())
    res = {
        "format": "kiln-eval-accuracy", "version": 1,
        "model": a.model, "data": a.data, "samples": len(samples),
        "inputs": ",".join("%s=%s" % (n, dims_str(x.shape)) for n, x in first),
        "how": how, "batch": a.batch, "threads": a.threads, "jobs": a.jobs,
        "correct": correct, "accuracy": 100.0 * correct / len(samples),
        "seconds": {"build": round(t_build, 3), "run": round(t_run, 3)},
        "torch_accuracy": None, "diff_points": None,
        "torch_agreement": None, "max_abs_logit_diff": None,
    }
    info_path = a.info or os.path.join(os.path.dirname(os.path.abspath(a.data)), "info.json")
    split = os.path.basename(os.path.normpath(a.data))
    if os.path.isfile(info_path):
        with open(info_path) as f:
            info = json.load(f)
        acc = info.get("torch_accuracy", {}).get("heldout" if split == "heldout" else split)
        if acc is not None:
            res["torch_accuracy"] = 100.0 * acc
            res["diff_points"] = res["accuracy"] - res["torch_accuracy"]
    tpath = os.path.join(a.data, "torch_outputs.npy")
    if os.path.isfile(tpath):
        t = np.load(tpath).astype(np.float64)
        if t.shape == logits.shape:
            res["torch_agreement"] = int((t.argmax(1) == pred).sum())
            res["max_abs_logit_diff"] = float(np.abs(t - logits).max())
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kiln", help="the kiln binary")
    ap.add_argument("model", help="ONNX model or kiln engine")
    ap.add_argument("data", help="folder of sample sub-folders and labels.txt")
    ap.add_argument("--labels", help="labels file (default DATA/labels.txt)")
    ap.add_argument("--info", help="info.json with torch_accuracy (default DATA/../info.json)")
    ap.add_argument("--batch", type=int, default=1, help="samples per kiln run (default 1)")
    ap.add_argument("--reference", action="store_true",
                    help="run the ONNX model unoptimized instead of an engine")
    ap.add_argument("--threads", type=int, default=1, help="kiln --threads (default 1)")
    ap.add_argument("--jobs", type=int, default=1, help="kiln processes at once (default 1)")
    ap.add_argument("--output", type=int, default=0, help="which output holds the logits")
    ap.add_argument("--max-diff", type=float, default=None,
                    help="exit 1 when |kiln - PyTorch| accuracy exceeds this many points")
    ap.add_argument("--min-accuracy", type=float, default=None,
                    help="exit 1 when kiln's accuracy (%%) is below this")
    ap.add_argument("--build-arg", action="append", default=[], metavar="ARG",
                    help="an argument for the engine's kiln build (repeatable; use the "
                         "--build-arg=--precision form for arguments that start with -)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    if a.build_arg and (a.reference or (os.path.isfile(a.model) and is_engine(a.model))):
        ap.error("--build-arg needs an ONNX model built into an engine (no --reference)")
    if a.batch < 1 or a.jobs < 1 or a.threads < 1 or a.output < 0:
        ap.error("--batch, --jobs and --threads must be >= 1, --output >= 0")
    try:
        if not os.path.isfile(a.model):
            raise DataError("%s: no such file" % a.model)
        res = evaluate(a)
    except DataError as e:
        print("eval_accuracy: %s" % e, file=sys.stderr)
        return 2
    except RuntimeError as e:
        print("eval_accuracy: %s" % e, file=sys.stderr)
        return 1

    fails = []
    if a.max_diff is not None:
        if res["diff_points"] is None:
            fails.append("--max-diff needs PyTorch's accuracy (info.json) and none was found")
        elif abs(res["diff_points"]) > a.max_diff + 1e-9:   # 1 of 500 is 0.2 points
            fails.append("kiln %.2f%% vs PyTorch %.2f%%: %+.2f points, limit %g"
                         % (res["accuracy"], res["torch_accuracy"], res["diff_points"],
                            a.max_diff))
    if a.min_accuracy is not None and res["accuracy"] < a.min_accuracy:
        fails.append("accuracy %.2f%% is below %g%%" % (res["accuracy"], a.min_accuracy))
    res["pass"] = not fails

    if a.json:
        print(json.dumps(res, indent=1))
    else:
        n = res["samples"]
        print("%s on %s: %d samples (%s), %s, batch %d, %d thread(s), %d job(s)"
              % (res["model"], res["data"], n, res["inputs"], res["how"], res["batch"],
                 res["threads"], res["jobs"]))
        print("kiln top-1     %7.2f%%  (%d/%d)   build %.2fs, run %.2fs"
              % (res["accuracy"], res["correct"], n, res["seconds"]["build"],
                 res["seconds"]["run"]))
        if res["torch_accuracy"] is not None:
            print("PyTorch top-1  %7.2f%%  (info.json)   difference %+.2f points"
                  % (res["torch_accuracy"], res["diff_points"]))
        if res["torch_agreement"] is not None:
            print("same prediction as PyTorch on %d/%d samples; max |logit - PyTorch's| %.3g"
                  % (res["torch_agreement"], n, res["max_abs_logit_diff"]))
    for f in fails:
        print("eval_accuracy: FAIL: %s" % f, file=sys.stderr)
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
