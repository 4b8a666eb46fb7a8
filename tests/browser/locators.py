"""Exact locators for the app's widgets in the browser tests.

Every widget of the app has an explicit ``key``, and Streamlit marks the widget's box with
the class ``st-key-<key>``: a widget is found by that key and its ARIA role, never by a
label, which can be a substring of another (``get_by_label("Rows")`` also matched the zoom
canvases, labelled "… Zoom: rows 0–31, cols 0–31 …", once they had drawn). A choice inside
a widget (a radio option, a selectbox's option) is found by its role and its whole name
(``exact=True``). Streamlit names a slider twice over (its ``aria-labelledby`` lists the
input and its label: "Bit width Bit width"), so sliders are found by key alone.
"""

from __future__ import annotations

from playwright.sync_api import Locator, Page

__all__ = ["choose_option", "choose_radio", "click_checkbox", "widget"]


def widget(page: Page, key: str, role: str) -> Locator:
    """The element of role ``role`` (``"slider"``, ``"spinbutton"``, ``"combobox"``,
    ``"checkbox"``, ``"button"``...) inside the widget whose key is ``key``."""
    return page.locator(f".st-key-{key}").get_by_role(role)


def choose_radio(page: Page, key: str, option: str) -> Locator:
    """Click the option named exactly ``option`` of the radio widget ``key`` (on its label:
    Streamlit draws over the input itself); returns the option's radio button."""
    box = page.locator(f".st-key-{key}")
    # ``has`` is looked for inside each label: a locator from the page, not from the box
    box.locator("label").filter(has=page.get_by_role("radio", name=option, exact=True)).click()
    return box.get_by_role("radio", name=option, exact=True)


def click_checkbox(page: Page, key: str) -> Locator:
    """Click the checkbox widget ``key`` (on its label: Streamlit draws over the input);
    returns the checkbox."""
    box = page.locator(f".st-key-{key}")
    box.locator("label").filter(has=page.get_by_role("checkbox")).click()
    return box.get_by_role("checkbox")


def choose_option(page: Page, key: str, option: str) -> None:
    """Open the selectbox ``key`` and pick the option named exactly ``option`` (the list
    opens outside the widget's box)."""
    box = widget(page, key, "combobox")
    box.click()
    # The list is virtualised (only the options in view exist): typing the name filters
    # it, so an option far down a long list (the shipped formats) is drawn too.
    box.press_sequentially(option)
    page.get_by_role("option", name=option, exact=True).click()
