"""kiln: ONNX models in, fast CPU inference out.

    import kiln, numpy as np
    engine = kiln.build("model.onnx", shapes={"input": (1, 3, 224, 224)})
    engine.save("model.kiln")
    engine = kiln.load("model.kiln")          # an engine file or an ONNX model
    out = engine.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

    sess = kiln.InferenceSession("model.onnx")  # ONNX Runtime's API (docs/PYTHON.md)
    probs, = sess.run(None, {sess.get_inputs()[0].name: x})

Errors raise kiln.Error subclasses (one per kn_status of the C API) carrying
kiln's one-line message.  docs/PYTHON.md describes the package.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kiln
from ._kiln import (CancelledError, DtypeError, Error, FileError, InternalError,
                    InvalidArgumentError, LimitError, MissingError, OutOfMemoryError, ParseError,
                    ShapeError, UnsupportedError)

__version__ = _kiln.__version__

__all__ = [
    "build", "load", "read_tensor", "validate", "Engine", "TensorInfo", "ValidationResult",
    "Gate", "BudgetReport", "Error", "InvalidArgumentError", "FileError",
    "ParseError", "UnsupportedError", "ShapeError", "DtypeError", "MissingError", "LimitError",
    "OutOfMemoryError", "InternalError", "CancelledError", "InferenceSession", "SessionOptions",
    "RunOptions", "NodeArg", "GraphOptimizationLevel", "ExecutionMode",
    "get_available_providers", "get_device", "__version__",
]

PathLike = Union[str, "os.PathLike[str]"]
Dims = Union[Sequence[int], str]


class TensorInfo:
    """An input or output of an Engine: name, numpy dtype (None for bfloat16, which numpy
    lacks), shape (a tuple with None for dynamic dims, or None when the rank is unknown),
    dim_params (the symbolic names of dynamic dims, None where unnamed) and kiln_dtype
    (kiln's dtype name)."""

    __slots__ = ("name", "dtype", "shape", "dim_params", "kiln_dtype")

    def __init__(self, name: str, dtype: Optional[np.dtype], shape: Optional[Tuple],
                 kiln_dtype: str, dim_params: Tuple):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.kiln_dtype = kiln_dtype
        self.dim_params = dim_params

    def __repr__(self) -> str:
        return "TensorInfo(name=%r, dtype=%s, shape=%r)" % (self.name, self.dtype, self.shape)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorInfo) and self.name == other.name
                and self.dtype == other.dtype and self.shape == other.shape)

    __hash__ = None  # type: ignore[assignment]


def _percentile(sorted_v: Sequence[float], p: float) -> float:
    """kn_cli_percentile: linear interpolation between order statistics (numpy's default),
    as `kiln bench` and `kiln profile` compute their percentiles."""
    n = len(sorted_v)
    idx = (n - 1) * p
    lo, hi = int(math.floor(idx)), int(math.ceil(idx))
    return float(sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (idx - lo))


_SEQ_WORDS = ("seq", "len", "token", "time", "step", "word")


def _default_dim(info: "TensorInfo", d: int) -> int:
    """The CLI's size of a dynamic dim nothing fixes (tools/kiln/session.c default_dim):
    the first is a batch (1); a later one named like a sequence, or any later dim of an
    integer input, 128; one named height or width 224; else 1."""
    p = (info.dim_params[d] or "").lower()
    if d > 0 and (any(w in p for w in _SEQ_WORDS) or info.dtype.kind in "iu"):
        return 128
    if d > 0 and ("height" in p or "width" in p):
        return 224
    return 1


def _dims_text(shape: Sequence[int]) -> str:
    return "x".join(str(int(d)) for d in shape)


class Engine(_kiln.Engine):
    """A built kiln model, ready to run: made by kiln.build() or kiln.load().

    The model is read-only and shared; each run takes a context (activation arena and
    thread pool) from a small pool inside the Engine, so several Python threads may call
    run() at once, each on its own context, with the GIL released during the run.
    ``threads`` sets the threads of each run (None: KILN_NUM_THREADS, else every CPU)."""

    __slots__ = ()

    @property
    def budget(self) -> Optional["BudgetReport"]:
        """The accuracy-budget search that built this Engine (kiln.build with min_cosine,
        max_abs_error or max_accuracy_drop), else None."""
        b = self._budget
        return BudgetReport(b) if b is not None else None

    @property
    def inputs(self) -> List[TensorInfo]:
        """The graph inputs (not initializers), in order."""
        return [TensorInfo(*x) for x in self._io(False)]

    @property
    def outputs(self) -> List[TensorInfo]:
        """The graph outputs, in order."""
        return [TensorInfo(*x) for x in self._io(True)]

    def _feed(self, inputs: Optional[Mapping[str, Any]], seed: int) -> Dict[str, np.ndarray]:
        """inputs completed with generated ones: floats uniform in [-1, 1), integers 0,
        bools True (the CLI's token-id and mask heuristics need the graph: give such
        inputs explicitly); dynamic dims sized as the CLI sizes them."""
        feed = dict(inputs or {})
        rng = np.random.default_rng(seed)
        for info in self.inputs:
            if info.name in feed:
                continue
            if info.shape is None:
                raise InvalidArgumentError("%s: input '%s' has an unknown rank: give it in "
                                           "inputs=" % (self.path, info.name))
            if info.dtype is None:
                raise UnsupportedError("%s: input '%s': cannot generate %s data" %
                                       (self.path, info.name, info.kiln_dtype))
            shape = tuple(d if d is not None else _default_dim(info, k)
                          for k, d in enumerate(info.shape))
            if info.dtype.kind == "f":
                feed[info.name] = rng.uniform(-1, 1, shape).astype(info.dtype)
            elif info.dtype.kind == "b":
                feed[info.name] = np.ones(shape, info.dtype)
            else:
                feed[info.name] = np.zeros(shape, info.dtype)
        return feed

    def _shapes_text(self, feed: Mapping[str, Any]) -> str:
        parts = ["%s=%s" % (i.name, _dims_text(np.shape(feed[i.name]))) for i in self.inputs]
        return " ".join(parts) if parts else "no inputs"

    def bench(self, inputs: Optional[Mapping[str, np.ndarray]] = None, *,
              runs: Optional[int] = None, duration: Optional[float] = None, warmup: int = 3,
              threads: Optional[int] = None, seed: int = 1) -> Dict[str, Any]:
        """Times runs as `kiln bench --json` does and returns its numbers as a dict.

        ``warmup`` untimed runs, then ``runs`` timed runs, or runs for ``duration``
        seconds, or by default at least 10 runs and 1 s.  Keys as the CLI's JSON:
        min_ms, mean_ms, p50_ms, p90_ms, p99_ms, max_ms (percentiles interpolated
        linearly between order statistics), throughput_qps (runs / their summed time),
        wall_s, threads, runs, warmup, inputs, peak_rss_bytes, load_ms, model_load_ms,
        build_ms, first_run_ms, and the census of reference kernels (reference_share,
        reference_steps: from a few more runs timed per step).  Inputs not given are generated (floats uniform in
        [-1, 1), integers 0, bools True)."""
        if runs is not None and duration is not None:
            raise InvalidArgumentError("kiln: bench: runs and duration exclude each other")
        feed = self._feed(inputs, seed)
        r = self._time_runs(feed, runs=runs or 0, duration=duration or 0.0, warmup=warmup,
                            threads=threads or 0)
        ms = np.sort(r["ms"])
        n = len(ms)
        total = float(ms.sum())
        times = self._times
        return {
            "model": self.path,
            "engine": self.is_engine,
            "threads": r["threads"],
            "runs": n,
            "warmup": warmup,
            "inputs": self._shapes_text(feed),
            "min_ms": float(ms[0]),
            "mean_ms": total / n,
            "p50_ms": _percentile(ms, 0.5),
            "p90_ms": _percentile(ms, 0.9),
            "p99_ms": _percentile(ms, 0.99),
            "max_ms": float(ms[-1]),
            "throughput_qps": n / (total / 1e3) if total > 0 else 0.0,
            "wall_s": r["wall_s"],
            "peak_rss_bytes": _kiln._peak_rss(),
            "load_ms": times["load_ms"] + times["build_ms"],
            "model_load_ms": times["load_ms"],
            "build_ms": times["build_ms"],
            "first_run_ms": r["first_run_ms"],
            **self._census(feed, min(max(n, 3), 10), threads or 0),
        }

    _CONTROL_FLOW = ("If", "Loop", "Scan", "SequenceMap")

    def _reference_share(self, step_us, nthreads) -> Dict[str, Any]:
        # as the CLI's census: steps on the reference kernel by time, control-flow
        # steps (their bodies have kernels of their own) not counted
        total = float(sum(step_us))
        ref, n_ref = 0.0, 0
        for i, us in enumerate(step_us):
            si = self._step_info(i, nthreads)
            if (si["tactic"] and si["tactic"] != "reference") or si["op"] in self._CONTROL_FLOW:
                continue
            ref += us
            n_ref += 1
        return {"reference_share": ref / total if total > 0 else 0.0, "reference_steps": n_ref}

    def _census(self, feed, runs: int, threads: int) -> Dict[str, Any]:
        r = self._profile_runs(feed, runs=runs, warmup=0, threads=threads)
        sp = r["spans"]
        main = sp[sp[:, 2] == 0]
        us = []
        for i in range(self.step_count):
            mine = main[main[:, 1] == i]
            us.append(float(((mine[:, 4] - mine[:, 3]) * 1e-3).mean()) if len(mine) else 0.0)
        return self._reference_share(us, r["threads"])

    def profile(self, inputs: Optional[Mapping[str, np.ndarray]] = None, *, runs: int = 20,
                warmup: int = 3, threads: Optional[int] = None,
                seed: int = 1) -> Dict[str, Any]:
        """Profiles runs as `kiln profile --json` does and returns its numbers as a dict
        (format "kiln-profile"): latency_ms (mean, median, p90, p99, min, max of each run's
        wall time), steps (per step: its calling-thread span's mean, median, min and max
        in us over the runs, share of the steps' total, FLOPs, bytes, GFLOP/s and GB/s at
        the median, the IO model's predicted_us and bound, arena_live_bytes, heap_bytes),
        steps_total_us, steps_total_median_us, steps_cover and memory (arena_bytes,
        weights_bytes, peak_rss_bytes).  The trace and the HTML report stay with the
        CLI."""
        feed = self._feed(inputs, seed)
        r = self._profile_runs(feed, runs=runs, warmup=warmup, threads=threads or 0)
        nthreads = r["threads"]
        run_ms = r["run_ms"]
        sp = r["spans"]  # run, step, thread, start_ns, end_ns, heap_bytes
        main = sp[sp[:, 2] == 0]
        steps_ms = np.zeros(runs)
        np.add.at(steps_ms, main[:, 0], (main[:, 4] - main[:, 3]) * 1e-6)
        cover = float(np.mean(np.where(run_ms > 0, steps_ms / np.where(run_ms > 0, run_ms, 1),
                                       0)))
        n_steps = self.step_count
        stats = []
        for i in range(n_steps):
            mine = main[main[:, 1] == i]
            us = np.sort((mine[:, 4] - mine[:, 3]) * 1e-3)
            last = mine[mine[:, 0] == runs - 1]
            heap = int(last[-1, 5]) if len(last) else 0
            if len(us):
                stats.append((float(us.mean()), _percentile(us, 0.5), float(us[0]),
                              float(us[-1]), heap))
            else:
                stats.append((0.0, 0.0, 0.0, 0.0, heap))
        total_mean = sum(s[0] for s in stats)
        total_median = sum(s[1] for s in stats)
        steps = []
        timeline = []
        for i, (mean, median, lo, hi, heap) in enumerate(stats):
            si = self._step_info(i, nthreads)
            moved = si["bytes_read"] + si["bytes_written"]
            steps.append({
                "index": i, "name": si["name"], "op": si["op"],
                "onnx_nodes": [c for c in si["covers"].split(",") if c],
                "tactic": si["tactic"], "tiling": si["tiling"], "precision": si["precision"],
                "flops": si["flops"], "bytes_read": si["bytes_read"],
                "bytes_written": si["bytes_written"], "mean_us": mean, "median_us": median,
                "min_us": lo, "max_us": hi,
                "share": mean / total_mean if total_mean > 0 else 0.0,
                "gflops": si["flops"] / (median * 1e3) if median > 0 else 0.0,
                "gbs": moved / (median * 1e3) if median > 0 else 0.0,
                "predicted_us": si["predicted_us"], "bound": si["bound"],
                "intensity": si["intensity"], "arena_live_bytes": si["arena_live_bytes"],
                "heap_bytes": heap,
            })
            timeline.append({"step": i, "name": si["name"],
                             "arena_live_bytes": si["arena_live_bytes"], "heap_bytes": heap})
        ms = np.sort(run_ms)
        st = self.stats()
        return {
            "format": "kiln-profile", "version": 1, "model": self.path,
            "engine": self.is_engine, "inputs": self._shapes_text(feed), "threads": nthreads,
            "runs": runs, "warmup": warmup,
            "latency_ms": {"mean": float(run_ms.mean()), "median": _percentile(ms, 0.5),
                           "p90": _percentile(ms, 0.9), "p99": _percentile(ms, 0.99),
                           "min": float(ms[0]), "max": float(ms[-1])},
            "steps_total_us": total_mean, "steps_total_median_us": total_median,
            "steps_cover": cover,
            **self._reference_share([x["mean_us"] for x in steps], nthreads),
            "steps": steps,
            "memory": {"arena_bytes": st["arena_bytes"], "weights_bytes": st["param_bytes"],
                       "peak_rss_bytes": _kiln._peak_rss(), "timeline": timeline},
        }


def _dims_spec(name: str, dims: Dims) -> str:
    if isinstance(dims, str):
        return "%s=%s" % (name, dims)
    return "%s=%s" % (name, _dims_text(dims))


def _shape_specs(shapes: Union[None, Mapping[str, Dims], Iterable[str]]) -> Optional[List[str]]:
    if shapes is None:
        return None
    if isinstance(shapes, Mapping):
        return [_dims_spec(k, v) for k, v in shapes.items()]
    return [str(s) for s in shapes]


def _profile_specs(profiles: Union[None, Mapping[str, Any], Iterable[str]]) -> Optional[List[str]]:
    if profiles is None:
        return None
    if isinstance(profiles, Mapping):
        out = []
        for k, v in profiles.items():
            if isinstance(v, str):
                out.append("%s=%s" % (k, v))
                continue
            if len(v) != 3:
                raise InvalidArgumentError(
                    "kiln: profiles[%r]: expected (min, opt, max) shapes, got %r" % (k, v))
            out.append("%s=%s" % (k, ":".join(_dims_text(s) for s in v)))
        return out
    return [str(s) for s in profiles]


_SIZE_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(v: Union[None, int, str], what: str = "workspace") -> int:
    if v is None:
        return 0
    if isinstance(v, str):
        s = v.strip().upper().rstrip("B").rstrip("I")
        mul = _SIZE_SUFFIX.get(s[-1:], 1)
        try:
            return int(float(s[:-1] if mul > 1 else s) * mul)
        except ValueError:
            raise InvalidArgumentError("kiln: %s: expected bytes such as 512M, got %r" % (what, v))
    if v < 0:
        raise InvalidArgumentError("kiln: %s must not be negative, got %d" % (what, v))
    return int(v)


Samples = Union[None, Mapping[str, np.ndarray], Sequence[Mapping[str, np.ndarray]]]


def build(model_path: PathLike, shapes: Union[None, Mapping[str, Dims], Iterable[str]] = None,
          profiles: Union[None, Mapping[str, Any], Iterable[str]] = None,
          precision: Optional[str] = None, workspace: Union[None, int, str] = None,
          disable_passes: Optional[Iterable[str]] = None, *, optimize: bool = True,
          reference_kernels: bool = False, tactics: Optional[str] = None,
          threads: Optional[int] = None, timing_cache: Optional[PathLike] = None,
          layer_precisions: Optional[Iterable[str]] = None,
          calibration: Optional[PathLike] = None, min_cosine: Optional[float] = None,
          max_abs_error: Optional[float] = None, max_accuracy_drop: Optional[float] = None,
          data: Samples = None, labels: Optional[Sequence[int]] = None, seed: int = 1,
          search: str = "sensitivity", reverse: bool = False) -> Engine:
    """Builds an ONNX model into an Engine, as `kiln build` does (without writing it:
    Engine.save does).

    shapes: fixed sizes of dynamic inputs, {"input": (1, 3, 224, 224)} or
      ["input=1x3x224x224"].
    profiles: dynamic ranges, {"input_ids": ((1, 8), (1, 128), (4, 512))} or
      ["input_ids=1x8:1x128:4x512"]; memory is planned for the largest.
    precision: "fp32" (default), "bf16", "fp16", "int8" (needs calibration) or "best".
    layer_precisions: per-step overrides, ["PATTERN=PRECISION", ...] (kiln build
      --layer-precision).  calibration: int8 ranges, a file made by `kiln calibrate`.
    workspace: cap on the activation arena, bytes or "512M".
    disable_passes: optimization passes not to run (`kiln build --help` lists them).
    optimize=False skips every pass; reference_kernels=True runs the reference kernels;
    tactics "timed" or "heuristic"; threads: threads timing the tactics (and running the
    trials of an accuracy budget); timing_cache: a file of tactic timings to reuse and
    extend.

    An accuracy budget (docs/PRECISION.md): min_cosine, max_abs_error and
    max_accuracy_drop (top-1 points, needs labels) bound the reduced-precision build
    against the fp32 reference path on data (a list of {input name: ndarray}, one dict per
    sample; None: one sample generated from seed) and labels (one class per prediction of
    output 0, in sample order).  When the requested build breaks the budget, steps go back
    to fp32 until it holds: search "sensitivity" (kiln build's: the most sensitive first)
    or "bisect" (kiln debug precision's: in step order, reverse=True from the end).  The
    Engine's .budget says what was tried and which steps stayed in fp32; a budget that no
    choice of steps keeps raises LimitError (its .report holds the search).
    The GIL is released while building."""
    budget = min_cosine is not None or max_abs_error is not None or max_accuracy_drop is not None
    if not budget and (data is not None or labels is not None or seed != 1
                       or search != "sensitivity" or reverse):
        raise InvalidArgumentError("kiln: build: data, labels, seed, search and reverse are for "
                                   "an accuracy budget: give min_cosine, max_abs_error or "
                                   "max_accuracy_drop")
    return _kiln._load(
        os.fspath(model_path), build=True, shapes=_shape_specs(shapes),
        profiles=_profile_specs(profiles), precision=precision, workspace=_bytes(workspace),
        disable_passes=list(disable_passes) if disable_passes is not None else None,
        optimize=optimize, reference_kernels=reference_kernels, tactics=tactics,
        threads=threads or 0,
        timing_cache=os.fspath(timing_cache) if timing_cache is not None else None,
        cls=Engine,
        layer_precisions=list(layer_precisions) if layer_precisions is not None else None,
        calibration=os.fspath(calibration) if calibration is not None else None,
        min_cosine=min_cosine, max_abs_error=max_abs_error,
        max_accuracy_drop=max_accuracy_drop, data=data, labels=labels, seed=seed,
        search=search, reverse=reverse)


class BudgetReport:
    """What an accuracy-budget build (kiln.build with min_cosine, max_abs_error or
    max_accuracy_drop) measured, as `kiln build` prints it:

    steps: the candidates, the steps the requested build runs in reduced precision, in
      step order, each {"name", "precision", "pattern"} (pattern: the name as a
      layer_precisions PATTERN only it matches);
    trials: every trial build in order, each {"phase" ("requested", "all_fp32",
      "sensitivity", "bisect", "refine"), "step" (sensitivity: the one reduced), "fp32" (the
      step names kept in fp32), "cosine", "max_abs_error", "top1", "top1_drop", "used" (the
      largest fraction of a bound used), "pass"};
    order: the candidates by sensitivity, most sensitive first (search "sensitivity");
    kept_fp32: the step names the Engine keeps in fp32 (empty: the requested build keeps
      the budget); passed; reference_top1 (None without labels); builds; seconds."""

    __slots__ = ("steps", "trials", "order", "kept_fp32", "passed", "reference_top1", "builds",
                 "seconds")

    def __init__(self, d: Mapping[str, Any]):
        self.steps = list(d["steps"])
        self.trials = list(d["trials"])
        self.order = list(d["order"])
        self.kept_fp32 = list(d["kept_fp32"])
        self.passed = bool(d["pass"])
        self.reference_top1 = d["reference_top1"] if d["reference_top1"] >= 0 else None
        self.builds = d["builds"]
        self.seconds = d["seconds"]

    @property
    def layer_precisions(self) -> List[str]:
        """kept_fp32 as kiln.build(layer_precisions=...) / --layer-precision specs."""
        pat = {s["name"]: s["pattern"] for s in self.steps}
        return ["%s=fp32" % pat[n] for n in self.kept_fp32]

    def __repr__(self) -> str:
        return "BudgetReport(passed=%r, kept_fp32=%r, %d of %d steps, %d builds)" % (
            self.passed, self.kept_fp32, len(self.kept_fp32), len(self.steps), self.builds)


_GATE_KEYS = ("max_p99_ms", "max_rss", "max_abs_error", "min_cosine", "max_accuracy_drop")


class Gate:
    """One limit of kiln.validate: name (the keyword: "max_abs_error"...), cli_name
    ("max-abs-error"), limit, measured, margin (room left: limit - measured for a maximum,
    measured - limit for min_cosine; negative when it fails), passed, and for accuracy the
    output name and sample index where the worst was measured (else None)."""

    __slots__ = ("name", "cli_name", "limit", "measured", "margin", "passed", "output",
                 "sample")

    def __init__(self, name: str, g: Mapping[str, Any], outputs: Sequence[Mapping[str, Any]]):
        self.name = name
        self.cli_name = g["name"]
        self.limit = g["limit"]
        self.measured = g["measured"]
        self.margin = g["margin"]
        self.passed = bool(g["pass"])
        self.output = outputs[g["output"]]["name"] if g["output"] >= 0 else None
        self.sample = g["sample"] if g["sample"] >= 0 else None

    def __repr__(self) -> str:
        return "Gate(%s: %s, measured %r, limit %r, margin %r)" % (
            self.name, "PASS" if self.passed else "FAIL", self.measured, self.limit,
            self.margin)


class ValidationResult:
    """What kiln.validate measured (kn_validate; `kiln validate --json`'s numbers).

    passed: every limit given passes.  gates: {keyword: Gate} for the limits given, in
    the CLI's order; failed: the Gates that failed.  outputs: per output {"name",
    "compared", "dtype", "shape", "max_abs_error", "max_rel_error", "cosine",
    "worst_abs_sample", "worst_cosine_sample"}; max_abs_error and min_cosine: the worst
    over outputs and samples; latency_ms: {"min", "mean", "p50", "p90", "p99", "max"} of
    the timed runs, latency_runs_ms their times sorted; peak_rss_bytes; top1 and
    reference_top1 (percent, None without labels); samples, threads, runs, warmup, inputs
    (the first sample's dims), engine, model.  as_dict() is the `kiln validate --json`
    object."""

    __slots__ = ("passed", "gates", "outputs", "max_abs_error", "min_cosine", "latency_ms",
                 "latency_runs_ms", "peak_rss_bytes", "top1", "reference_top1", "samples",
                 "threads", "runs", "warmup", "inputs", "engine", "model", "data", "seed",
                 "_gates")

    def __init__(self, d: Mapping[str, Any], engine: str, model: str, data: Optional[str],
                 seed: int):
        self.passed = bool(d["pass"])
        self.outputs = list(d["outputs"])
        self._gates = list(d["gates"])
        self.gates = {k: Gate(k, g, self.outputs) for k, g in zip(_GATE_KEYS, self._gates)
                      if g["given"]}
        self.max_abs_error = d["max_abs_error"]
        self.min_cosine = d["min_cosine"]
        self.latency_ms = dict(d["latency_ms"])
        self.latency_runs_ms = d["latency_runs_ms"]
        self.peak_rss_bytes = d["peak_rss_bytes"]
        self.top1 = d["top1"] if d["top1_rows"] else None
        self.reference_top1 = d["reference_top1"] if d["top1_rows"] else None
        self.samples = d["samples"]
        self.threads = d["threads"]
        self.runs = d["runs"]
        self.warmup = d["warmup"]
        self.inputs = d["inputs"]
        self.engine = engine
        self.model = model
        self.data = data
        self.seed = seed

    @property
    def failed(self) -> List[Gate]:
        return [g for g in self.gates.values() if not g.passed]

    def as_dict(self) -> Dict[str, Any]:
        """The object `kiln validate --json` prints (format "kiln-validate", version 1;
        docs/CLI.md); data is "memory" for samples given as arrays."""
        limits = []
        for g in self.gates.values():
            x = {"name": g.cli_name, "measured": g.measured, "limit": g.limit,
                 "margin": g.margin, "pass": g.passed}
            if g.output is not None:
                x["output"] = g.output
                x["sample"] = g.sample
            limits.append(x)
        acc: Dict[str, Any] = {"max_abs_error": self.max_abs_error,
                               "min_cosine": self.min_cosine}
        if self.top1 is not None:
            acc["top1"] = self.top1
            acc["reference_top1"] = self.reference_top1
        outs = []
        for o in self.outputs:
            x = {"name": o["name"], "compared": o["compared"]}
            if o["compared"]:
                x.update({"dtype": o["dtype"], "shape": list(o["shape"]),
                          "max_abs_error": o["max_abs_error"],
                          "max_rel_error": o["max_rel_error"], "cosine": o["cosine"],
                          "worst_abs_sample": o["worst_abs_sample"],
                          "worst_cosine_sample": o["worst_cosine_sample"]})
            outs.append(x)
        acc["outputs"] = outs
        return {"format": "kiln-validate", "version": 1, "engine": self.engine,
                "model": self.model, "pass": self.passed, "samples": self.samples,
                "data": self.data, "seed": self.seed, "inputs": self.inputs,
                "threads": self.threads, "runs": self.runs, "warmup": self.warmup,
                "limits": limits, "accuracy": acc, "latency_ms": dict(self.latency_ms),
                "peak_rss_bytes": self.peak_rss_bytes}

    def __repr__(self) -> str:
        return "ValidationResult(passed=%r, gates=%r)" % (self.passed,
                                                          list(self.gates.values()))


def validate(engine: Union["Engine", PathLike], against: PathLike, *,
             max_abs_error: Optional[float] = None, min_cosine: Optional[float] = None,
             max_p99_ms: Optional[float] = None, max_rss: Union[None, int, str] = None,
             max_accuracy_drop: Optional[float] = None, data: Samples = None,
             labels: Optional[Sequence[int]] = None, seed: int = 1,
             shapes: Union[None, Mapping[str, Dims], Iterable[str]] = None, runs: int = 20,
             warmup: int = 3, threads: Optional[int] = None) -> ValidationResult:
    """The gates of `kiln validate` (kn_validate): runs engine (an Engine, e.g. from
    kiln.build, or the path of an engine file) and the reference path of the ONNX model
    `against` (the graph as imported, unoptimized) on the same inputs, and checks each
    limit given against what it measures:

    max_abs_error: the largest |engine - reference| of any output element; min_cosine:
      the smallest cosine similarity of an output (both the worst over outputs and
      samples; a NaN on one side fails them);
    max_p99_ms: the p99 latency of `runs` timed runs on the first sample after `warmup`;
    max_rss: the process's peak RSS (bytes or "512M"; getrusage's high-water mark, which
      counts everything this Python process held before);
    max_accuracy_drop: top-1 of output 0 at most this many points below the reference's,
      on labels (one class per prediction, in sample order).
    data: the samples, a list of {input name: ndarray} (one dict per sample); None: one
    sample generated from seed (floats uniform in [-1, 1), integers and bools 0 or 1,
    dynamic dims from shapes, else 1).  shapes also fixes the reference build's dynamic
    inputs.  threads: of both runs (None: the Engine's, else the default).

    Returns a ValidationResult (.passed, .gates); a limit that fails is not an exception.
    Failures to measure (a file, a mismatch between engine and model) raise kiln.Error.
    The GIL is released while it runs."""
    e = engine if isinstance(engine, _kiln.Engine) else load(engine)
    if max_rss is not None:
        max_rss = _bytes(max_rss, "max_rss")
    d = _kiln._validate(e, os.fspath(against), data=data, labels=labels, seed=seed,
                        shapes=_shape_specs(shapes), runs=runs, warmup=warmup,
                        threads=threads or 0, max_p99_ms=max_p99_ms, max_rss=max_rss,
                        max_abs_error=max_abs_error, min_cosine=min_cosine,
                        max_accuracy_drop=max_accuracy_drop)
    return ValidationResult(d, e.path, os.fspath(against),
                            None if data is None else "memory", seed)


def read_tensor(path: PathLike) -> np.ndarray:
    """Reads an ONNX TensorProto (.pb, as in ONNX's test data) or a NumPy .npy file
    (told apart by their contents), as `kiln run --input` does."""
    return _kiln._read_tensor(os.fspath(path))[0]


def load(path: PathLike, *, threads: Optional[int] = None) -> Engine:
    """Loads a kiln engine file, or an ONNX model which is then built with the default
    options (as `kiln run` does).  threads: threads of each run (None: the default)."""
    e = _kiln._load(os.fspath(path), build=True, cls=Engine)
    e.threads = threads
    return e


from .onnxruntime import (ExecutionMode, GraphOptimizationLevel, InferenceSession,  # noqa: E402
                          NodeArg, RunOptions, SessionOptions, get_available_providers,
                          get_device)
