"""Threads and the GIL: kernels release the GIL (other Python threads run meanwhile), the thread
count is a setting that cannot change a result, and results computed in several Python threads
at once are those of one."""
import threading

import numpy as np

import bitgrad as bg


def test_kernels_release_the_gil():
    x = bg.tensor(np.random.RandomState(0).standard_normal((700, 700)).astype(np.float32))
    bg.set_num_threads(1)
    counter = [0]
    stop = threading.Event()
    started = threading.Event()

    def spin():
        started.set()
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    started.wait()
    try:
        before = counter[0]
        for _ in range(3):
            y = x @ x  # ~0.7 GFLOP each: tens of milliseconds with the GIL released
        during = counter[0] - before
    finally:
        stop.set()
        t.join()
    assert y.shape == (700, 700)
    # with the GIL held for the whole call the spinning thread could only run between calls
    # (a handful of switch intervals); released, it counts all the while
    print("spins during the products:", during)
    assert during > 20000, during


def test_the_thread_count_cannot_change_a_result():
    rs = np.random.RandomState(1)
    a = bg.tensor(rs.standard_normal((97, 131)).astype(np.float32), requires_grad=True)
    b = bg.tensor(rs.standard_normal((131, 67)).astype(np.float32), requires_grad=True)
    prints = set()
    for n in (1, 2, 3, 4, 7, 8):
        bg.set_num_threads(n)
        assert bg.get_num_threads() == n
        a.grad = None
        b.grad = None
        y = (a @ b).gelu().softmax(axis=1).log().mean()
        y.backward()
        prints.add(bg.fingerprint([y, a.grad, b.grad]))
    assert len(prints) == 1


def test_python_threads_computing_at_once_get_the_bits_of_one():
    rs = np.random.RandomState(2)
    xs = [bg.tensor(rs.standard_normal((64, 200)).astype(np.float32)) for _ in range(4)]
    w = bg.tensor(rs.standard_normal((200, 50)).astype(np.float32), requires_grad=True)

    def work(x):
        return bg.fingerprint([(x @ w).tanh().sum(axis=0)])

    alone = [work(x) for x in xs]
    bg.set_num_threads(2)
    results = [None] * len(xs)

    def run(i):
        for _ in range(5):
            results[i] = work(xs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == alone
