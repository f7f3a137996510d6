/**
 * The site's integrity check: every file the page fetches is compared with the manifest's
 * sha256 before it is used (a damaged or half-copied part is one clear error naming the file).
 * @module site/verify
 */

/** A fetched file whose bytes are not the manifest's. */
export class DamagedFile extends Error {
  /** @param {string} name @param {string} why */
  constructor(name, why) {
    super(`${name} is damaged (${why}): copy or export the site again`);
    this.name = "DamagedFile";
    this.file = name;
  }
}

/** @param {ArrayBuffer} digest */
const hex = (digest) => Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");

/**
 * Whether the page can check hashes: `crypto.subtle` exists only in secure contexts
 * (https or localhost), so a site served over plain http from a LAN address is not checked.
 * @param {any} [subtle]
 */
export const canVerify = (subtle = globalThis.crypto?.subtle) => typeof subtle?.digest === "function";

/**
 * Check `bytes` against the manifest's entry for `name`; throws {@link DamagedFile}.
 * @param {string} name the path the manifest lists
 * @param {Uint8Array} bytes
 * @param {{files: Record<string, {bytes: number, sha256?: string}>}} manifest
 * @param {any} [subtle] crypto.subtle (tests pass a fake)
 */
export async function verifyFile(name, bytes, manifest, subtle = globalThis.crypto?.subtle) {
  const entry = manifest.files[name];
  if (!entry) throw new DamagedFile(name, "not in the manifest");
  if (bytes.byteLength !== entry.bytes) throw new DamagedFile(name, `${bytes.byteLength} bytes, the manifest says ${entry.bytes}`);
  if (!canVerify(subtle) || !entry.sha256) return;
  const got = hex(await subtle.digest("SHA-256", bytes));
  if (got !== entry.sha256) throw new DamagedFile(name, "its sha256 is not the manifest's");
}

/**
 * Fetch a small file of the site, check it, and parse it as JSON.
 * @param {string} base @param {string} name
 * @param {{files: Record<string, {bytes: number, sha256?: string}>}} manifest
 */
export async function fetchCheckedJson(base, name, manifest) {
  const response = await fetch(base + name);
  if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  await verifyFile(name, bytes, manifest);
  return JSON.parse(new TextDecoder().decode(bytes));
}
