"""Tile and wave quantization of a GEMM on a GPU (vectorised).

A GPU GEMM C (M x N) = A (M x K) B (K x N) splits C into thread-block tiles of ``tm x tn``
elements; every tile costs the same time whether or not the matrix fills it (tile
quantization), and the tiles run in waves of one tile per streaming multiprocessor (SM), so a
last, partial wave costs a whole wave (wave quantization). NVIDIA, "Matrix Multiplication
Background User's Guide", sections "Tile Quantization" and "Wave Quantization",
https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html
(DU-09799-001, 2023-02); its example: an A100 (108 SMs) runs 256 x 128 tiles one per SM, so
a 1792 x 1792 output (7 x 14 = 98 tiles) fills 98 of 108 SMs (retold in
https://notes.haroldbenoit.com/ml/engineering/gpus/gpu-memory-tiling, retrieved 2026-11).

A convolution runs as an implicit GEMM (Chetlur et al., "cuDNN: Efficient Primitives for Deep
Learning", arXiv:1410.0759, 2014: the convolution lowered to a matrix product): forward
M = batch x output pixels, N = output channels, K = input channels x kh x kw; backward-data
M = batch x input pixels, N = input channels, K = output channels x kh x kw; backward-weights
M = output channels, N = input channels x kh x kw, K = batch x output pixels.

The utilisation returned here is useful work over the work of the padded tiles in whole waves,
so GEMM time = FLOPs / (rate x utilisation) is the padded work at the full rate: non-decreasing
in M, hence in the batch. With several tile shapes the best utilisation is taken (a library
heuristic picks the tile per problem).
"""

from __future__ import annotations

import numpy as np

# Tile shapes (M x N): the guide's 256 x 128 tile of its wave example, one per SM, in either
# orientation (C^T = B^T A^T: a library may tile the transposed product; cuBLAS's kernels come
# in 256x128 and 128x256). The guide also shows smaller tiles (128x128 .. 64x64) that raise
# parallelism at a lower fraction of peak (less operand reuse); that rate is not published,
# and small tiles at the large tile's rate would make quantization free. One orientation only
# (256x128) would slow the H100 GEMM of efficiencies.toml's Hopper figure (4224 x 2048 output:
# 17 x 16 tiles in 3 waves of 132) to 0.67 of its measured rate; 128x256 runs it in 2 full waves.
TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256))


def utilisation(m, n, waves, sm, tiles=TILES) -> np.ndarray:
    """Useful / executed GEMM work, in (0, 1], broadcast over the arguments.

    ``m``, ``n``: GEMM output dimensions (``n`` <= 0 marks "no GEMM": utilisation 1);
    ``waves``: 1 where the tiles run in waves over the SMs, 0 where they do not (a split-K
    GEMM whose long K is divided to fill the GPU); ``sm``: SMs per device, 0 = unknown (no
    wave quantization).
    """
    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    nn = np.asarray(n, dtype=float)
    n = np.maximum(nn, 1.0)
    s = np.asarray(sm, dtype=float)
    use_waves = (np.asarray(waves) > 0) & (s > 0)
    slots = np.maximum(s, 1.0)
    best = np.zeros(np.broadcast_shapes(m.shape, n.shape, use_waves.shape))
    for tm, tn in tiles:
        mt, nt = np.ceil(m / tm), np.ceil(n / tn)
        count = mt * nt
        executed = np.where(use_waves, np.ceil(count / slots) * slots, count) * (tm * tn)
        best = np.maximum(best, m * n / executed)
    return np.where(nn > 0, best, 1.0)
