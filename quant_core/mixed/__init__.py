"""Mixed precision: which scheme for which tensor, so that a model fits a size budget.

    rows = measure_tensor(name, w, DEFAULT_CANDIDATES, importance=a)   # the table, per weight
    problem = build_problem(all_rows, AllocationRules(floor=Floor("Q8_0")))
    alloc = allocate(problem, Budget(4.5))                              # 4.5 bits per weight
    alloc.recipe()                                                      # tensor -> scheme

Modules: ``candidates`` (the schemes, their GGUF types), ``importance`` (``diag(XᵀX)``),
``sensitivity`` (the table's rows), ``allocation`` (Lagrangian relaxation and fix-up),
``exports`` (llama.cpp ``--tensor-type`` lines, JSON recipe, CSV), ``causal`` (KL and
perplexity of a causal language model from a local folder, fake-quantized weights).
"""

from .allocation import (
    DEFAULT_FLOOR_PATTERN,
    STORED,
    Allocation,
    AllocationProblem,
    AllocationRules,
    Budget,
    BudgetOutOfRange,
    BudgetUnit,
    CurvePoint,
    Floor,
    Objective,
    Pin,
    allocate,
    allocation_curve,
    build_problem,
    configs_of,
    uniform_allocation,
    uniform_points,
)
from .candidates import (
    ALL_CANDIDATES,
    DEFAULT_CANDIDATES,
    LAB_CANDIDATES,
    SHIPPED,
    Candidate,
    candidate_named,
    check_candidates,
    config_for,
    gguf_type,
)
from .importance import importance_from_capture, input_importance, weighted_error
from .sensitivity import ROW_FIELDS, SensitivityRow, measure_tensor

__all__ = [
    "ALL_CANDIDATES",
    "DEFAULT_CANDIDATES",
    "DEFAULT_FLOOR_PATTERN",
    "LAB_CANDIDATES",
    "ROW_FIELDS",
    "SHIPPED",
    "STORED",
    "Allocation",
    "AllocationProblem",
    "AllocationRules",
    "Budget",
    "BudgetOutOfRange",
    "BudgetUnit",
    "Candidate",
    "CurvePoint",
    "Floor",
    "Objective",
    "Pin",
    "SensitivityRow",
    "allocate",
    "allocation_curve",
    "build_problem",
    "candidate_named",
    "check_candidates",
    "config_for",
    "configs_of",
    "gguf_type",
    "importance_from_capture",
    "input_importance",
    "measure_tensor",
    "uniform_allocation",
    "uniform_points",
    "weighted_error",
]
