import re
import shutil
import struct
import subprocess
import zlib

import pytest
from evaluate_run_fixture import make_run

from mens.evaluate.gates import run_gates
from paths import EXAMPLES

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome", "chrome")
                 if shutil.which(n)), None)


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows) of an 8-bit non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def test_report_is_self_contained(tmp_path, run_cli):
    run = make_run(tmp_path)
    code, out, _ = run_cli("report", run, "-o", tmp_path / "r.html")
    assert code == 0
    page = (tmp_path / "r.html").read_text()
    for title in ("loss", "tokens / s", "learning rate", "bench during training",
                  "corpus: samples per category", "bench pass@1 by category"):
        assert f"<title>{title}</title>" in page
    assert page.count("<polyline") >= 6  # train loss, val loss, tokens/s, lr, bench pass@1 and parse rate
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "<script" not in page


def test_report_draws_the_base_and_the_fine_tune_side_by_side(tmp_path, run_cli):
    """With a benched base (the pipeline's bench.compare_base), the first chart pairs the base's and
    the fine-tune's parse rate and pass@1, greedy and in grammar mode, each bar as long as its value."""
    import json

    run = make_run(tmp_path)
    res = json.loads((run / "benchmark_results.json").read_text())
    res.update(parse_rate=0.9, pass_at_1=0.5, grammar={"lang": "vox", "parse_rate": 1.0, "pass_at_1": 0.55},
               base={"parse_rate": 0.1, "pass_at_1": 0.0, "grammar": {"lang": "vox", "parse_rate": 0.95,
                                                                     "pass_at_1": 0.05}})
    (run / "benchmark_results.json").write_text(json.dumps(res))
    assert run_cli("report", run, "-o", tmp_path / "r.html")[0] == 0
    page = (tmp_path / "r.html").read_text()
    chart = page[page.index("<title>held-out bench: the base and the fine-tune</title>"):]
    chart = chart[:chart.index("</svg>")]
    widths = [float(w) for w in re.findall(r'<rect x="150" y="[\d.]+" width="([\d.]+)" height="14"', chart)]
    assert widths == pytest.approx([0.1 * 240, 0.9 * 240, 1.0, 0.5 * 240, 0.95 * 240, 240, 0.05 * 240, 0.55 * 240])
    assert page.index("held-out bench: the base") < page.index("<title>loss</title>")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
@pytest.mark.slow  # headless Chromium
def test_report_renders_in_headless_chromium(tmp_path):
    from mens.evaluate.report import write_report

    run = make_run(tmp_path, steps=30)
    run_gates(run, EXAMPLES / "gates.yaml")
    page = write_report(run)
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--force-device-scale-factor=1", "--window-size=960,720", f"--screenshot={shot}",
                    page.resolve().as_uri()], capture_output=True, timeout=60, check=True)
    width, height, bpp, rows = decode_png(shot.read_bytes())
    assert (width, height) == (960, 720)
    # Not blank: a good share of pixels differ from the page background, and the chart colours
    # (the blue of the first series) are actually drawn.
    background = rows[5][:3]
    pixels = [row[i:i + 3] for row in rows[::4] for i in range(0, width * bpp, bpp * 4)]
    drawn = sum(p != background for p in pixels) / len(pixels)
    assert drawn > 0.15, f"only {drawn:.1%} of the screenshot differs from the background"
    assert any(abs(p[0] - 0x25) < 12 and abs(p[1] - 0x63) < 12 and p[2] > 0xd0 for p in pixels)
