"""GPTQ's Hessian of calibration inputs and the upper Cholesky factor of its damped inverse,
the two linear-algebra steps of ``gptq.gptq_quantize``."""

from __future__ import annotations

import torch

from .algo_checks import emit

__all__ = ["DEFAULT_DAMP", "MAX_DAMP_RETRIES", "gptq_hessian", "inverse_hessian_factor"]

# Each failed Cholesky multiplies the dampening by 10, this many times at most.
MAX_DAMP_RETRIES = 6
# A zero relative dampening that fails restarts from the default.
DEFAULT_DAMP = 0.01


def gptq_hessian(x: torch.Tensor) -> torch.Tensor:
    """``H = 2 XᵀX / tokens`` (float64, ``[in, in]``) of calibration inputs ``X [tokens, in]``."""
    x64 = x.detach().to(torch.float64)
    return x64.T @ x64 * (2.0 / x64.shape[0])


def inverse_hessian_factor(
    h: torch.Tensor, damp: float, messages: list[str]
) -> tuple[torch.Tensor, float, float]:
    """Upper Cholesky factor ``U`` of ``(H + λI)⁻¹`` (float64), retrying with 10x the
    dampening while ``H + λI`` is not numerically positive definite."""
    mean_diag = float(torch.diagonal(h).mean())
    eye = torch.eye(h.shape[0], dtype=h.dtype, device=h.device)
    rel = damp
    for attempt in range(MAX_DAMP_RETRIES + 1):
        lam = rel * mean_diag
        # With J the reversal permutation and J (H + λI) J = M Mᵀ (M lower), the upper
        # Cholesky factor of (H + λI)⁻¹ is U = J M⁻¹ J: one factorisation and one triangular
        # inverse instead of the reference's Cholesky, cholesky_inverse and Cholesky again
        # (the same U in exact arithmetic; about 1.5x faster).
        damped = h + lam * eye
        chol, info = torch.linalg.cholesky_ex(damped.flip(0, 1))
        # A pivot at rounding level (relative to the largest diagonal) means a numerically
        # singular matrix that factorised by luck: its inverse would be noise.
        floor = h.shape[0] * torch.finfo(h.dtype).eps * float(torch.diagonal(damped).max())
        if int(info) == 0 and float(torch.diagonal(chol).min()) ** 2 > floor:
            inv = torch.linalg.solve_triangular(chol, eye, upper=False)
            u = inv.flip(0, 1)
            if bool(torch.isfinite(u).all()) and bool((torch.diagonal(u) > 0).all()):
                return u, rel, lam
        if attempt == MAX_DAMP_RETRIES:
            break
        new_rel = rel * 10 if rel > 0 else DEFAULT_DAMP
        emit(
            messages,
            f"GPTQ: the Hessian H + {rel:g}·mean(diag H)·I is not positive definite "
            f"(singular or ill-conditioned calibration inputs); retrying with dampening "
            f"{new_rel:g}",
        )
        rel = new_rel
    raise ValueError(
        f"GPTQ: the Hessian is not positive definite even with dampening {rel:g} "
        f"(mean diag H = {mean_diag:.6g}); the calibration inputs are unusable"
    )
