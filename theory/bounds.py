"""placeholder"""
import math
def compressor_q2(name, layer_sizes, k=None):
    sizes = [int(s) for s in layer_sizes]
    if name == "identity":
        return 0.0
    if name == "topk":
        return 1.0 - min(max(1, math.floor(k * d)) / d for d in sizes)
    if name == "sign":
        return 1.0 - min(1.0 / d for d in sizes)
    if name == "hvsign":
        return 1.0 - min(k / d for d in sizes)
    raise ValueError(name)
