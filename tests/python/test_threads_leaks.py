"""One Engine run from two Python threads (correct, and faster than one thread doing
both: the GIL is released during runs), and no reference or memory leak over 10,000
runs."""
import gc
import os
import sys
import threading
import time

import numpy as np
import pytest

import kiln


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_two_threads_one_engine(tinycnn):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    e = kiln.load(tinycnn, threads=1)  # 1 kiln thread per context: 2 Python threads, 2 cores
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-1, 1, (32, 3, 32, 32)).astype(np.float32) for _ in range(2)]
    want = [e.run({"input": x})["logits"] for x in xs]
    runs = 100  # about 0.13 s a thread on an idle machine
    errors = []

    def work(k, n):
        try:
            for _ in range(n):
                got = e.run({"input": xs[k]})["logits"]
                if not np.array_equal(got, want[k]):
                    errors.append("thread %d: wrong result" % k)
                    return
        except Exception as ex:  # noqa: BLE001 - reported below
            errors.append("thread %d: %r" % (k, ex))

    def one_thread():
        t0 = time.perf_counter()
        work(0, runs)
        work(1, runs)
        return time.perf_counter() - t0

    def two_threads():
        ts = [threading.Thread(target=work, args=(k, runs)) for k in range(2)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    # the machine is shared: best of five tries, a modest margin (ideal is 0.5)
    ratios = []
    for _ in range(5):
        one, two = one_thread(), two_threads()
        assert not errors, errors
        ratios.append(two / one)
        if ratios[-1] < 0.8:
            break
    print("two threads / one thread doing both: %s" % ", ".join("%.2f" % r for r in ratios))
    load = os.getloadavg()[0]
    if min(ratios) >= 0.8 and load > 2.5:
        # other processes hold the cores (this test alone makes a load of about 1)
        pytest.skip("machine busy (load %.1f on %d CPUs): two threads / one = %.2f" %
                    (load, os.cpu_count(), min(ratios)))
    assert min(ratios) < 0.8, ratios


def test_gil_released_during_run(tinycnn):
    """While one thread runs the model, another thread's Python code keeps running."""
    e = kiln.load(tinycnn, threads=1)
    x = np.random.default_rng(4).uniform(-1, 1, (256, 3, 32, 32)).astype(np.float32)
    e.run({"input": x})
    stop = threading.Event()
    ticks = [0]

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        a = ticks[0]
        time.sleep(0.1)  # the spinner's rate with the main thread idle
        rate = (ticks[0] - a) / 0.1
        before = ticks[0]
        t0 = time.perf_counter()
        for _ in range(3):
            e.run({"input": x})
        took = time.perf_counter() - t0
        during = ticks[0] - before
    finally:
        stop.set()
        t.join()
    # holding the GIL, each run would leave the spinner only the switch interval
    # (5 ms) before it; released, the spinner keeps its rate all along
    share = during / (rate * took)
    print("spinner kept %.0f%% of its idle rate during %.0f ms of runs" % (100 * share,
                                                                           took * 1e3))
    assert share > 0.2, share


def test_many_threads_share_contexts(tinycnn):
    e = kiln.load(tinycnn, threads=1)
    x = np.random.default_rng(2).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
    want = e.run({"input": x})["logits"]
    bad = []

    def work():
        for _ in range(30):
            if not np.array_equal(e.run({"input": x})["logits"], want):
                bad.append(1)

    ts = [threading.Thread(target=work) for _ in range(20)]  # more than the pool keeps
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_no_leaks_over_10000_runs(tinycnn):
    e = kiln.load(tinycnn, threads=1)
    sess = kiln.InferenceSession(tinycnn)
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    xd = x.astype(np.float16)  # converted on every run
    feed = {"input": x}
    for _ in range(500):
        e.run(feed)
    gc.collect()
    rc_x, rc_feed, rc_xd = sys.getrefcount(x), sys.getrefcount(feed), sys.getrefcount(xd)
    rss0 = rss_bytes()
    objs0 = len(gc.get_objects())
    for i in range(10000):
        out = e.run(feed)
        y = out["logits"]
        assert sys.getrefcount(y) == 3  # out's entry, y, getrefcount's argument
    for _ in range(2000):
        (y2,) = sess.run(None, {"input": xd})
    for _ in range(2000):
        try:
            e.run({"input": x[:, :1]})
        except kiln.ShapeError:
            pass
        try:
            e.run({})
        except kiln.MissingError:
            pass
    del out, y, y2
    gc.collect()
    assert sys.getrefcount(x) == rc_x
    assert sys.getrefcount(feed) == rc_feed
    assert sys.getrefcount(xd) == rc_xd
    assert len(gc.get_objects()) - objs0 < 100
    grown = rss_bytes() - rss0
    print("RSS grew %.1f KiB over 14,000 runs and 4,000 failed ones" % (grown / 1024))
    assert grown < 4 << 20, grown
