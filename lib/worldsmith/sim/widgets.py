"""A notebook stepper over a `SideBySide`: Step, Step to end, Reset, and an action box (ipywidgets).

    from worldsmith.sim.widgets import stepper
    stepper(SideBySide.from_kinds(book, ["harness", "nearest"], episode=episode))   # last line of a cell

ipywidgets is imported only when a stepper is made (it is in the `dev` extra), so the library
does not need it.
"""

from __future__ import annotations

from typing import Any

from worldsmith.sim.htmlview import DIFF_LEGEND, escape_html, step_html
from worldsmith.sim.sidebyside import SideBySide

__all__ = ["stepper"]


def _ipywidgets() -> Any:
    try:
        import ipywidgets
    except ImportError as error:
        raise ImportError("the notebook stepper needs ipywidgets: pip install 'worldsmith[dev]' "
                          "(or pip install ipywidgets)") from error
    return ipywidgets


def _summary_html(side_by_side: SideBySide) -> str:
    rows = "".join(
        f"<tr><td>{escape_html(name)}</td><td>{int(s['steps'])}</td><td>{s['exact']:.2f}</td>"
        f"<td>{s['f1']:.2f}</td><td>{s['edit']:.2f}</td></tr>"
        for name, s in side_by_side.summary().items())
    return ("<table><tr><th>method</th><th>scored steps</th><th>exact</th><th>F1</th><th>edit</th></tr>"
            f"{rows}</table>")


def stepper(side_by_side: SideBySide) -> Any:
    """An `ipywidgets.VBox` driving `side_by_side`; the step shown is the latest (the HTML output is rebuilt).

    The action box, when not empty, is the next action (a typed one); empty, Step follows the episode.
    """
    widgets = _ipywidgets()
    step_button = widgets.Button(description="Step", icon="play", tooltip="the next recorded action, or the typed one")
    run_button = widgets.Button(description="Step to end", icon="forward")
    reset_button = widgets.Button(description="Reset", icon="undo")
    action = widgets.Text(placeholder="your own action (empty: the recorded one)", layout=widgets.Layout(width="40%"))
    status = widgets.HTML()
    output = widgets.HTML()

    def show(message: str = "") -> None:
        where = f"step {side_by_side.position}"
        if side_by_side.episode is not None:
            where += f" of {len(side_by_side.episode.turns)} recorded"
        mode = "teacher forcing" if side_by_side.mode == "teacher" else "open loop"
        status.value = f"<b>{escape_html(where)}</b> · {mode}" + (f" · {escape_html(message)}" if message else "")
        views = side_by_side.history
        body = step_html(views[-1]) if views else "<i>no step yet: press Step</i>"
        output.value = f"{body}<p style='font-size:0.8rem'>{escape_html(DIFF_LEGEND)}</p>{_summary_html(side_by_side)}"

    def on_step(_: Any) -> None:
        typed = action.value.strip()
        try:
            side_by_side.step(typed or None)
        except ValueError as error:
            show(str(error))
            return
        action.value = ""
        show()

    def on_run(_: Any) -> None:
        show(f"{len(side_by_side.run())} steps taken")

    def on_reset(_: Any) -> None:
        side_by_side.reset()
        show("reset")

    step_button.on_click(on_step)
    run_button.on_click(on_run)
    reset_button.on_click(on_reset)
    show()
    box = widgets.VBox([widgets.HBox([step_button, run_button, reset_button, action]), status, output])
    box.side_by_side = side_by_side  # what the stepper drives, for whoever holds the widget
    return box
