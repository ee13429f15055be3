"""The two solvers of exact batched PPR, over the transposed transition matrix and a block of
seed columns: power iteration (columns retired as they converge) and BiCGSTAB on the linear
system."""

from __future__ import annotations

CHECK_EVERY = 2
"""Steps between convergence checks (an L1 pass over the block costs a quarter of a step)."""
FLUSH_EVERY = 8
"""Steps whose deltas are summed in the work precision before one add into the scores."""


def power_iteration(pt, dangling, s, damping, tol, max_iter):
    """Power iteration on the step differences until each column's L1 change is below tol.

    With x_{k+1} = d P^T x_k + ((1-d) + d (dangling . x_k)) s, the change
    delta_{k+1} = d P^T delta_k + d (dangling . delta_k) s is linear, so it is iterated alone
    (in the precision of `pt`, float32 in mixed mode) as e_k = delta_k / d^(k-1), which needs no
    scaling pass (e_{k+1} = P^T e_k + (dangling . e_k) s); the factor d^(k-1) is folded into the
    add that sums the deltas over FLUSH_EVERY steps in that precision before they go into x (in
    the precision of s): rounding errors scale with the shrinking deltas, not with x, and the
    wide pass over x is paid once per FLUSH_EVERY steps. Convergence is checked every
    CHECK_EVERY steps; the L1 error at the end is below tol * d / (1 - d). The seed term
    touches only the rows some column seeds. Converged columns leave the products (see COMPACT_AT).
    """
    import torch

    # the seed term as the rows any column seeds, one column each (zero where a column has no
    # seed there): one row-wise add a step, where a dense seed set (LinearRAG seeds every
    # passage) made a scattered add of every (row, column) entry the costliest op of a step
    rows = torch.unique(torch.nonzero(s, as_tuple=True)[0])
    seed_vals = s[rows].to(pt.dtype)
    x = s.clone()
    # first step from x_0 = s: delta_1 = d P^T s + ((1-d) + d dangling.s) s - s
    ws = s.to(pt.dtype)
    e = torch.sparse.mm(pt, ws).mul_(damping)
    coeff = (1.0 - damping) + damping * (dangling @ ws)
    e.index_add_(0, rows, seed_vals * coeff - seed_vals)
    pending = e.clone()  # deltas not yet added into x
    scale = 1.0  # delta_k = scale * e_k
    column = torch.arange(s.shape[1], device=s.device)  # x's column of each column of e
    running = torch.ones(s.shape[1], dtype=torch.bool, device=s.device)
    steps = 1
    while True:
        done = steps >= max_iter
        if done or steps % CHECK_EVERY == 0:
            change = e.abs().sum(0).mul_(scale)
            # a converged column stops here, as it would alone: its scores do not depend on
            # which other queries share the batch (batched == one at a time); a zero column
            # stays zero, so each is cleared once
            stopped = torch.nonzero(running & (change < tol)).squeeze(1)
            if stopped.numel():
                e.index_fill_(1, stopped, 0)
                running[stopped] = False
            n_running = int(running.sum())
            done = done or n_running == 0
            if not done and n_running <= COMPACT_AT * e.shape[1]:
                _flush(x, pending, column)
                keep = torch.nonzero(running).squeeze(1)
                e, column = e[:, keep], column[keep]
                pending = torch.zeros_like(e)
                seed_vals = seed_vals[:, keep]
                running = running[keep]
        if done or steps % FLUSH_EVERY == 0:
            _flush(x, pending, column)
            pending.zero_()
        if done:
            break
        steps += 1
        lost = dangling @ e
        e = torch.sparse.mm(pt, e)
        e.index_add_(0, rows, seed_vals * lost)
        scale *= damping
        pending.add_(e, alpha=scale)
    return x, steps


COMPACT_AT = 0.75
"""Converged columns are dropped from the products once at most this share of the block's
columns still runs: at damping 0.85 half the queries converge within about a third of the
slowest one's steps (bench/kernels.py graph), so a block pays for its slow tail only."""


def _flush(x, pending, column) -> None:
    """Add the pending deltas into the scores of their columns of x."""
    if column.numel() == x.shape[1]:  # no column dropped yet: the same order
        x.add_(pending)
    else:
        x.index_add_(1, column, pending.to(x.dtype))


def bicgstab(pt, s, damping, tol, max_iter):
    """Solve (I - d P^T) y = s for every column at once (BiCGSTAB, per-column scalars); x = y / sum(y).

    Restarting from the seeds on dangling nodes only rescales the solution of the system
    without that term, hence the final normalisation. Krylov steps need far fewer sparse
    products than power iteration at high damping (two per step). Stops when every column's
    residual L1 norm is below tol * (1 - d) / 2, which bounds the L1 error of x by tol.
    """
    import torch

    def apply(v):
        return torch.addmm(v, pt, v, alpha=-damping)

    x = s.clone()
    r = s - apply(x)
    r_hat = r.clone()
    ones = torch.ones(s.shape[1], dtype=s.dtype, device=s.device)
    rho, alpha, omega = ones.clone(), ones.clone(), ones.clone()
    v = torch.zeros_like(s)
    p = torch.zeros_like(s)
    target = tol * (1.0 - damping) / 2
    best, stalls, steps = float("inf"), 0, 0
    tiny = torch.finfo(s.dtype).tiny
    while steps < max_iter:
        steps += 1
        rho_new = (r_hat * r).sum(0)
        beta = (rho_new / torch.where(rho.abs() > tiny, rho, tiny)) * (
            alpha / torch.where(omega.abs() > tiny, omega, tiny)
        )
        p = r + beta * (p - omega * v)
        v = apply(p)
        denom = (r_hat * v).sum(0)
        alpha = rho_new / torch.where(denom.abs() > tiny, denom, tiny)
        h = x + alpha * p
        s_vec = r - alpha * v
        if s_vec.abs().sum(0).max().item() < target:
            x = h
            break
        t = apply(s_vec)
        tt = (t * t).sum(0)
        omega = (t * s_vec).sum(0) / torch.where(tt > tiny, tt, tiny)
        x = h + omega * s_vec
        r = s_vec - omega * t
        rho = rho_new
        res = r.abs().sum(0).max().item()
        if res < target:
            break
        # the precision may not reach a tiny target: stop when the residual has not reached a
        # new low for 10 steps (BiCGSTAB residuals are not monotonic, so not sooner)
        if res < best * 0.999:
            best, stalls = res, 0
        else:
            stalls += 1
            if stalls >= 10:
                break
    x = x.clamp_min(0)
    return x / x.sum(0, keepdim=True), steps
