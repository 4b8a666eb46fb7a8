"""Two short English texts written for this project: ``CALIBRATION_TEXT`` collects the
input importance of a causal language model's layers; ``HELD_OUT_TEXT`` (no sentence in
common) is what KL divergence and perplexity are measured on. Varied on purpose: prose, a
dialogue, numbers, a recipe, a few lines of code and a list, so that no one kind of token
dominates."""

from __future__ import annotations

__all__ = ["CALIBRATION_TEXT", "HELD_OUT_TEXT"]

CALIBRATION_TEXT = """\
The harbour town woke slowly. Fishing boats came in before dawn, and by seven the market \
smelled of salt, diesel and fresh bread. Mara ran the small bookshop on the corner; she \
opened at nine, swept the step, and put out a crate of paperbacks at one euro each.

"Do you have anything on tides?" a boy asked her one morning.
"Second shelf from the top, next to the atlases," she said. "Bring it back if it's wrong."

Tides follow the Moon: about twice a day, roughly every 12 hours and 25 minutes, the sea \
rises and falls. Spring tides, when the Sun and Moon line up, can be 20% higher than neap tides.

To make the town's fish soup for four: fry one onion and two cloves of garlic in olive oil, \
add 400 g of tomatoes, a litre of stock and a pinch of saffron, simmer for 20 minutes, then \
add 600 g of white fish and cook for 5 minutes more.

def tide_height(t_hours, amplitude=1.8, period=12.42):
    return amplitude * math.cos(2 * math.pi * t_hours / period)

Shopping list: bread, lemons, stamps, batteries (AA), a map of the coast.
"""

HELD_OUT_TEXT = """\
At the edge of the old observatory, a telescope built in 1911 still turns on its brass \
track. Volunteers keep it oiled and open the dome on clear Friday nights, when anyone may \
climb the spiral stairs and look at Saturn's rings or the craters along the Moon's terminator.

"Why does the image wobble?" a visitor asked.
"Warm air rising off the roofs," the guide answered. "Wait for a still moment, and it sharpens."

Light from the Andromeda galaxy left it about 2.5 million years ago. The galaxy is \
approaching us at roughly 110 kilometres per second, and in some four billion years it \
will merge with the Milky Way; the stars themselves will almost never collide.

Cleaning a lens takes patience: blow off the dust first, then wipe gently in circles from \
the centre outwards with a soft cloth and a drop of alcohol, never pressing hard.

for night in observing_log:
    if night.clouds < 0.3 and night.moon_phase < 0.5:
        plan.append(night.date)

Packing list for a night out: red torch, thermos of tea, star chart, spare gloves, \
a folding chair and a notebook.
"""
