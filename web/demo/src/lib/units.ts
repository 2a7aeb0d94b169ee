// Byte counts for people: whole bytes below 1 KiB, then KiB … PiB with three significant digits,
// and "more than 1,024 PiB" beyond (a count that large only says "it does not fit anywhere").
const UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) throw new RangeError(`formatBytes: bytes must be a finite count ≥ 0; got ${bytes}`);
  if (bytes < 1024) return `${Math.round(bytes)} B`;
  let value = bytes / 1024;
  for (const unit of UNITS) {
    if (value < 1024) return `${value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)} ${unit}`;
    value /= 1024;
  }
  return 'more than 1,024 PiB';
}
