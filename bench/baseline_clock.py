"""PyTorch baselines beside kiln's lines in the compare scripts (fused_mlp, matmul, attention):
each baseline's time with the SM clock it ran at, and a warning where that clock is below 95% of
the clock kiln's lines ran at. A throttled baseline flatters kiln: on 2026-11-29 an H200 ran
PyTorch's samples at 1600-1750 MHz and kiln's at 1980 MHz, and torch.compile read as 0.78x of kiln.
Imported by the scripts' table code (bench/*_compare.sh)."""
import json

THROTTLED = 0.95  # as bench/pytorch_baselines.py's throttle_fraction


def timing(path, target, impl):
    """(median µs, SM MHz, noisy) of one implementation in a pytorch_baselines.py result file, or
    (None, None, False) where it has none."""
    try:
        with open(path) as f:
            t = json.load(f)["targets"][target]["impls"][impl]["timing"]
        return t["median_us"], t.get("sm_clock_mhz"), bool(t.get("noisy"))
    except (OSError, ValueError, KeyError, TypeError):
        return None, None, False


def shown(t):
    """'789.5 µs (1980 MHz)', with ', noisy' where pytorch_baselines.py flagged it; '-' for none."""
    us, mhz, noisy = t
    if not us:
        return "-"
    return "%.1f µs (%s%s)" % (us, "%.0f MHz" % mhz if mhz else "clock unknown",
                               ", noisy" if noisy else "")


def warning(baselines, kiln_records):
    """A line naming the baselines (name -> timing()) that ran below THROTTLED of the fastest SM
    clock among kiln's records (eval_record.py lines), or '' where none did."""
    kiln_mhz = max([r.get("sm_clock_mhz") or 0 for r in kiln_records] or [0])
    slow = [name for name, (us, mhz, _) in baselines.items()
            if us and mhz and kiln_mhz and mhz < THROTTLED * kiln_mhz]
    if not slow:
        return ""
    return ("WARNING: %s ran below %d%% of kiln's SM clock (%.0f MHz): the machine throttled "
            "them, so kiln's ratios against them overstate kiln; measure again"
            % (", ".join(slow), round(100 * THROTTLED), kiln_mhz))
