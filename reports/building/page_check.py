"""`make report-check`: a screenshot of a whole report page as headless Chromium renders it.

Chromium's --screenshot takes the window, not the page, so the page is first loaded once with a line of
script that writes its height into the DOM (read back from --dump-dom), then shot in a window that tall:
every table and figure of the page ends up in the PNG, however long the report grows.

    python -m reports.building.page_check results/brown/report.html build/report-check.png [--chromium chromium]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTH = 1400
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=10000"]
MEASURE = ('<script>addEventListener("load", () => '
           'document.body.dataset.pageHeight = document.documentElement.scrollHeight)</script></body>')


def page_height(chromium: str, page: Path) -> int:
    """The rendered height of `page` in pixels at WIDTH, measured on a copy with MEASURE added."""
    with tempfile.TemporaryDirectory() as folder:
        measured = Path(folder) / page.name
        measured.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE, 1), encoding="utf-8")
        dom = subprocess.run([chromium, *FLAGS, f"--window-size={WIDTH},1000", "--dump-dom", measured.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-page-height="(\d+)"', dom)
    if not found:
        raise SystemExit(f"report-check: Chromium did not render {page} (no page height came back)")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("shot", type=Path)
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args(argv)
    if shutil.which(args.chromium) is None:
        print(f"report-check: no {args.chromium} on PATH: apt-get install -y chromium, or set CHROMIUM", file=sys.stderr)
        return 2
    if not args.page.exists():
        print(f"report-check: no {args.page}: run make reproduce-brown or lmbench report brown", file=sys.stderr)
        return 2
    height = page_height(args.chromium, args.page)
    args.shot.parent.mkdir(parents=True, exist_ok=True)
    args.shot.unlink(missing_ok=True)
    subprocess.run([args.chromium, *FLAGS, f"--window-size={WIDTH},{height}",
                    f"--screenshot={args.shot.resolve()}", args.page.resolve().as_uri()],
                   capture_output=True, timeout=120)
    if not args.shot.exists() or args.shot.stat().st_size == 0:
        print(f"report-check: Chromium wrote no screenshot of {args.page}", file=sys.stderr)
        return 1
    print(f"report-check: {args.page} rendered whole ({WIDTH} x {height} px), screenshot in {args.shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
