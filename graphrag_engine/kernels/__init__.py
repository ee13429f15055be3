"""Device-agnostic compute kernels (PPR/RWR, shortest paths, cosine top-k, knapsack).

Imports nothing from `engine`: dependencies point cli/jobs -> engine -> kernels.
"""
