"""The alpha-beta cost model of tnt's allreduce that bench/cluster fits and projects (its README
states the assumptions).

For H hosts with k ranks each (p = H k ranks), a buffer of n bytes and links of R bit/s:

    T(n) = S alpha + n max(C beta_cpu, W 8 / (eta R))

The ring pipelines its segments, so a rank's CPU work and the wire overlap and the slower of the
two sets the pace (the additive form, n (C beta_cpu + W 8 / (eta R)), over-predicted the
measured 1 and 2 Gbit/s points by 24-56 % in bench/cluster's first run).

  S         latency steps of the algorithm's path (each costs alpha: wake-ups, syscalls, the wire)
  C         bytes each rank moves through its own CPU per byte of buffer (copy, reduce, TCP stack)
  W         bytes over each host link, per direction, per byte of buffer
  beta_cpu  seconds per such byte: the host's cost, fitted from the unshaped runs
  eta       goodput / tbf rate (TCP/IP headers, tbf's bursts), fitted from the rate sweep

  path (p = H k)                        S                      C                          W
  ring, n > small limit                 2 (p - 1)              2 (p - 1) / p              2 (p - 1) / p
  auto, n <= small limit (gather)       p - 1                  p - 1                      k k (H - 1)
  auto, n > small limit                 as the ring
  hierarchical (k > 1)                  2 (k - 1) + 2 (H - 1)  2 (k-1)/k + 2 (H-1)/(H k)  2 (H - 1) / H

The ring is node-aware (one link crossing per host and direction in every step); the
hierarchical path reduce-scatters within the host (k - 1 steps), allreduces shard i across hosts
among the hosts' local ranks i (k streams per link, each carrying 1/k), then allgathers within
the host (k - 1 steps).
"""
import math

SMALL_LIMIT = 16 << 10  # TNT_SMALL_ALLREDUCE_KB's default: gather and reduce locally


def shape(algorithm, hosts, per_host, nbytes):
    """(S, C, W) of the table above; algorithm "auto" (tnt's choice when TNT_ALLREDUCE_ALGORITHM is
    unset), "ring" or "hierarchical" (forced)."""
    p = hosts * per_host
    if algorithm == "hierarchical" and per_host > 1 and hosts > 1:
        return (2 * (per_host - 1) + 2 * (hosts - 1), 2 * (per_host - 1) / per_host + 2 * (hosts - 1) / (hosts * per_host),
                2 * (hosts - 1) / hosts)
    if algorithm == "auto" and nbytes <= SMALL_LIMIT:
        return p - 1, p - 1, per_host * per_host * (hosts - 1)
    return 2 * (p - 1), 2 * (p - 1) / p, 2 * (p - 1) / p


def predict(params, algorithm, hosts, per_host, nbytes, rate_bps):
    """Seconds; rate_bps None: the unshaped link, whose cost is all in beta_cpu."""
    s, c, w = shape(algorithm, hosts, per_host, nbytes)
    wire = 0.0 if rate_bps is None else w * 8.0 / (params["eta"] * rate_bps)
    return s * params["alpha"] + nbytes * max(c * params["beta_cpu"], wire)


def least_squares(rows, values):
    """Solves min |A x - b| by the normal equations (a handful of unknowns, no numpy here)."""
    m = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(m)] + [sum(r[i] * v for r, v in zip(rows, values))]
         for i in range(m)]
    for col in range(m):
        pivot = max(range(col, m), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            raise ValueError("the measurements do not determine the model (too few sizes or rates)")
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(m):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][m] / a[i][i] for i in range(m)]


def fit_cpu(points, large=1 << 20):
    """beta_cpu from the unshaped sizes >= large, where the wire costs nothing: least squares of the
    relative error of T = t0 + n C beta_cpu."""
    rows, values = [], []
    for q in points:
        if q["bytes"] < large or q["rate_bps"] is not None:
            continue
        _, c, _ = shape(q["algorithm"], q["hosts"], q["per_host"], q["bytes"])
        # Relative errors count: each row divided by the measured time.
        rows.append([1.0 / q["seconds"], q["bytes"] * c / q["seconds"]])
        values.append(1.0)
    if len(rows) < 2:
        raise ValueError("need two unshaped sizes >= 1 MiB to fit beta_cpu")
    return least_squares(rows, values)[1]


def fit_eta(points, beta_cpu, large=1 << 20):
    """eta from the shaped sizes >= large where the wire is the slower part: least squares of the
    relative error of T = n W 8 / (eta R)."""
    num = den = 0.0
    for q in points:
        if q["bytes"] < large or q["rate_bps"] is None:
            continue
        _, c, w = shape(q["algorithm"], q["hosts"], q["per_host"], q["bytes"])
        x = q["bytes"] * w * 8.0 / q["rate_bps"] / q["seconds"]  # T / x = 1 / eta
        if x <= q["bytes"] * c * beta_cpu / q["seconds"]:
            continue  # the CPU sets the pace at this rate: no information on the link
        num += x
        den += x * x
    if den == 0:
        raise ValueError("no shaped size >= 1 MiB where the link is slower than the CPU: cannot fit eta")
    return den / num


def fit_alpha(points, beta_cpu, small=SMALL_LIMIT):
    """alpha from the unshaped sizes <= small: least squares of S alpha = T - n C beta_cpu."""
    num = den = 0.0
    for q in points:
        if q["rate_bps"] is not None or q["bytes"] > small:
            continue
        s, c, _ = shape(q["algorithm"], q["hosts"], q["per_host"], q["bytes"])
        num += s * (q["seconds"] - q["bytes"] * c * beta_cpu)
        den += s * s
    if den == 0:
        raise ValueError("no unshaped sizes <= 16 KiB to fit alpha from")
    return num / den


def errors(params, points):
    """Each measured point with the model's prediction and the relative error."""
    out = []
    for q in points:
        model = predict(params, q["algorithm"], q["hosts"], q["per_host"], q["bytes"], q["rate_bps"])
        out.append({**q, "model_seconds": model, "error": (model - q["seconds"]) / q["seconds"]})
    return out


def step_projection(params, algorithm, per_host, hosts, rate_bps, job):
    """Weak scaling: every host computes job's per-host batch in job's measured compute time and
    the gradient (job["gradient_bytes"]) is allreduced every step. Returns the allreduce seconds
    and the efficiency compute / step without overlap (the step waits for the whole allreduce)
    and with full overlap (the allreduce runs under backward: step = forward + max(backward,
    allreduce) + optimizer)."""
    t = predict(params, algorithm, hosts, per_host, job["gradient_bytes"], rate_bps)
    compute = job["forward"] + job["backward"] + job["optimizer"]
    serial = compute + t
    overlapped = job["forward"] + max(job["backward"], t) + job["optimizer"]
    return {"allreduce_s": t, "step_s_no_overlap": serial, "step_s_overlap": overlapped,
            "efficiency_no_overlap": compute / serial, "efficiency_overlap": compute / overlapped}


def finite(x):
    return x is not None and math.isfinite(x)
