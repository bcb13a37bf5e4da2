/**
 * What the experiment config says about a hyperparameter (its `type`), which decides how it is
 * plotted: a `log` hyperparameter on a log axis, a `categorical` one on a category axis.
 * Pure: the unit tests run it under node.
 */

export type HparamType = 'const' | 'int' | 'double' | 'log' | 'categorical' | 'unknown';

const KNOWN_TYPES = new Set<HparamType>(['const', 'int', 'double', 'log', 'categorical']);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * The type of a hyperparameter named by its dotted path (`optimizer.lr` for a nested one), from
 * the experiment config's `hyperparameters` section. A bare value is a constant (Determined's
 * shorthand); a missing config or name is 'unknown'.
 */
export function hparamType(
  config: Record<string, unknown> | null | undefined,
  name: string
): HparamType {
  let node: unknown = config?.hyperparameters;
  for (const part of name.split('.')) {
    if (!isPlainObject(node) || typeof node.type === 'string') {
      return 'unknown';
    }
    if (!(part in node)) {
      return 'unknown';
    }
    node = node[part];
  }
  if (isPlainObject(node)) {
    const type = node.type;
    return typeof type === 'string' && KNOWN_TYPES.has(type as HparamType)
      ? (type as HparamType)
      : 'unknown';
  }
  return node === undefined ? 'unknown' : 'const';
}

/**
 * Whether to plot this hyperparameter on a log axis: its config type is `log` and every value
 * is positive (a log axis cannot place 0 or a negative value).
 */
export function useLogAxis(
  config: Record<string, unknown> | null | undefined,
  name: string,
  values: Iterable<number>
): boolean {
  if (hparamType(config, name) !== 'log') {
    return false;
  }
  let any = false;
  for (const value of values) {
    if (!(value > 0)) {
      return false;
    }
    any = true;
  }
  return any;
}
