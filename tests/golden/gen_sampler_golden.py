#!/usr/bin/python3
"""An independent implementation of bitgrad's Philox streams and epoch permutation
(docs/numerics.md, "Random numbers") in plain Python, for the sampler's golden values in
tests/data/loader_test.cpp.  Usage: /usr/bin/python3 tests/golden/gen_sampler_golden.py"""
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def philox(ctr, key):
    c = list(ctr)
    k = list(key)
    for r in range(10):
        if r > 0:
            k = [(k[0] + 0x9E3779B9) & M32, (k[1] + 0xBB67AE85) & M32]
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k[1]) & M32, p0 & M32]
    return c


def fnv1a(name):
    h = 0xcbf29ce484222325
    for ch in name.encode():
        h ^= ch
        h = (h * 0x100000001b3) & M64
    return h


def sub(sid, k):
    z = (sid + 0x9e3779b97f4a7c15 * (k + 1)) & M64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def u64(seed, sid, i):
    b = philox([(i // 2) & M32, (i // 2) >> 32, sid & M32, sid >> 32], [seed & M32, seed >> 32])
    w = (i % 2) * 2
    return b[w] | (b[w + 1] << 32)


def permutation(seed, sid, n):
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = (u64(seed, sid, n - 1 - i) * (i + 1)) >> 64
        p[i], p[j] = p[j], p[i]
    return p


shuffle = fnv1a("shuffle")
for epoch in (0, 1):
    print("epoch_order(10, true, 42, %d) = %s" % (epoch, permutation(42, sub(shuffle, epoch), 10)))
