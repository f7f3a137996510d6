/**
 * Non-monotone stretches of one token's probability trajectory: a mirror of
 * `iglens_viz/core/trajectory.py` (`against_segments`, `against_steps`), same rules:
 *
 * - segment j is flagged when sign(c_j) · sign(Δp) < 0 and |c_j| > threshold · max_j |c_j|
 *   (finite values only; Δp = 0 or NaN flags nothing);
 * - step s of segment j (point s → s+1) is flagged when it moves opposite to the segment's
 *   net change path[j, m] − path[j, 0] and |step| > threshold · max |step| over all steps
 *   of the token.
 * Comparisons are strict; sign(0) = 0.
 *
 * The threshold has no default here: the views pass the result's `nonmonotone_threshold`
 * (Python's one definition), and `ruleText` words the rule for the user with it.
 * @module nonmonotone
 */

/** @param {number} threshold */
function checkThreshold(threshold) {
  const t = Number(threshold);
  if (!(t >= 0 && t <= 1)) throw new RangeError(`threshold must be a fraction in [0, 1], got ${threshold}`);
  return t;
}

/** numpy.sign for a finite or NaN number. @param {number} x */
function sign(x) {
  return x > 0 ? 1 : x < 0 ? -1 : x === 0 ? 0 : NaN;
}

/**
 * Boolean mask of segments whose contribution opposes Δp by more than the threshold.
 * @param {ArrayLike<number>} contributions one token's (k,) contributions
 * @param {number} deltaP the token's net change
 * @param {number} threshold a fraction of the largest |contribution| (the result's `nonmonotone_threshold`)
 * @returns {boolean[]} (k,)
 */
export function againstSegments(contributions, deltaP, threshold) {
  const t = checkThreshold(threshold);
  const k = contributions.length;
  let scale = 0;
  for (let j = 0; j < k; j++) {
    const c = contributions[j];
    if (Number.isFinite(c) && Math.abs(c) > scale) scale = Math.abs(c);
  }
  const out = new Array(k).fill(false);
  if (!Number.isFinite(deltaP)) return out;
  const sd = sign(deltaP);
  for (let j = 0; j < k; j++) {
    const c = contributions[j];
    if (!Number.isFinite(c)) continue;
    out[j] = sign(c) * sd < 0 && Math.abs(c) > t * scale;
  }
  return out;
}

/**
 * Boolean mask of interpolation steps that move against their segment's net change.
 * @param {ArrayLike<number>} path f along each segment of one token, flat (k·(m+1)), row-major
 * @param {number} k number of segments
 * @param {number} threshold a fraction of the largest |step| (the result's `nonmonotone_threshold`)
 * @returns {boolean[][]} (k, m): entry [j][s] is the step from point s to s+1 of segment j
 */
export function againstSteps(path, k, threshold) {
  const t = checkThreshold(threshold);
  const m1 = k > 0 ? path.length / k : 0;
  if (!Number.isInteger(m1) || m1 < 2) {
    throw new RangeError(`path must be (k, m+1) with m >= 1, got ${path.length} values for k=${k}`);
  }
  const m = m1 - 1;
  let scale = 0;
  for (let j = 0; j < k; j++) {
    for (let s = 0; s < m; s++) {
      const d = path[j * m1 + s + 1] - path[j * m1 + s];
      if (Number.isFinite(d) && Math.abs(d) > scale) scale = Math.abs(d);
    }
  }
  /** @type {boolean[][]} */
  const out = [];
  for (let j = 0; j < k; j++) {
    const net = sign(path[j * m1 + m] - path[j * m1]);
    const row = new Array(m).fill(false);
    for (let s = 0; s < m; s++) {
      const d = path[j * m1 + s + 1] - path[j * m1 + s];
      if (!Number.isFinite(d)) continue;
      row[s] = sign(d) * net < 0 && Math.abs(d) > t * scale;
    }
    out.push(row);
  }
  return out;
}

/**
 * Indices of the `true` entries.
 * @param {boolean[]} mask
 */
export function flagged(mask) {
  const out = [];
  for (let j = 0; j < mask.length; j++) if (mask[j]) out.push(j);
  return out;
}

/**
 * The threshold as a percentage, shortest form ("5%", "2.5%").
 * @param {number} threshold a fraction in [0, 1]
 */
export function thresholdPercent(threshold) {
  return `${Number((100 * threshold).toPrecision(6))}%`;
}

/**
 * The segment rule in words, for the user: "against \u0394p by more than 60% of the largest
 * |contribution|".
 * @param {number} threshold the result's `nonmonotone_threshold`
 */
export function ruleText(threshold) {
  return `against \u0394p by more than ${thresholdPercent(threshold)} of the largest |contribution|`;
}

/**
 * The step rule's size condition in words: "by more than 60% of the largest |step|".
 * @param {number} threshold the result's `nonmonotone_threshold`
 */
export function stepRuleText(threshold) {
  return `by more than ${thresholdPercent(threshold)} of the largest |step|`;
}

/**
 * A view of part of an array (a typed array's subarray: no copy).
 * @param {ArrayLike<number>} a @param {number} from @param {number} to
 * @returns {ArrayLike<number>}
 */
function sliceOf(a, from, to) {
  const sub = /** @type {any} */ (a).subarray;
  return typeof sub === "function" ? sub.call(a, from, to) : Array.prototype.slice.call(a, from, to);
}

/**
 * @typedef {object} TokenFlags non-monotone positions of a whole result
 * @property {Uint8Array} flags 1 where the position's trajectory is non-monotone: some segment
 *   opposes Δp (`againstSegments`), or — with an interior path — some step moves against its
 *   segment (`againstSteps`)
 * @property {Float64Array} score the largest opposing |contribution| as a fraction of the
 *   position's largest |contribution| (0 where no segment is flagged; NaN without a target)
 * @property {number[]} positions the flagged positions, ascending
 */

/**
 * The non-monotone rule applied to every position at once (for the strip's markers, the
 * heatmap's gutter marks, the "non-monotone" colouring and the jump list).
 * @param {ArrayLike<number>} contributions (T·k), row-major
 * @param {ArrayLike<number>} deltaP (T)
 * @param {number} k segments
 * @param {number} threshold the result's `nonmonotone_threshold`
 * @param {ArrayLike<number>|null} [path] (T·k·(m+1)) interior path, or null
 * @returns {TokenFlags}
 */
export function tokenFlags(contributions, deltaP, k, threshold, path = null) {
  const T = deltaP.length;
  const flags = new Uint8Array(T);
  const score = new Float64Array(T);
  /** @type {number[]} */
  const positions = [];
  const per = path && T ? path.length / T : 0;
  for (let i = 0; i < T; i++) {
    const row = sliceOf(contributions, i * k, (i + 1) * k);
    if (!Number.isFinite(deltaP[i])) {
      score[i] = NaN;
      continue;
    }
    const segs = againstSegments(row, deltaP[i], threshold);
    let scale = 0,
      worst = 0;
    for (let j = 0; j < k; j++) {
      const c = row[j];
      if (!Number.isFinite(c)) continue;
      scale = Math.max(scale, Math.abs(c));
      if (segs[j]) worst = Math.max(worst, Math.abs(c));
    }
    score[i] = scale > 0 ? worst / scale : 0;
    let flagged = worst > 0;
    if (!flagged && per >= 2 * k) {
      const steps = againstSteps(sliceOf(/** @type {ArrayLike<number>} */ (path), i * per, (i + 1) * per), k, threshold);
      flagged = steps.some((s) => s.some(Boolean));
    }
    if (flagged) {
      flags[i] = 1;
      positions.push(i);
    }
  }
  return { flags, score, positions };
}
