/**
 * A tiny DOM builder. API data (experiment names, hyperparameters, log lines) is untrusted:
 * it only ever becomes text nodes or attribute values, never HTML, so a name like
 * `<img src=x onerror=alert(1)>` shows as those characters.
 */

export type Child = Node | string | number | null | undefined | false;

export interface IAttrs {
  class?: string;
  title?: string;
  /** Properties set directly (value, checked, type, ...). */
  props?: Record<string, unknown>;
  /** Plain attributes (data-*, aria-*, role, ...). */
  attrs?: Record<string, string>;
  style?: Partial<CSSStyleDeclaration>;
  on?: { [K in keyof HTMLElementEventMap]?: (event: HTMLElementEventMap[K]) => void };
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: IAttrs | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (attrs) {
    if (attrs.class) {
      element.className = attrs.class;
    }
    if (attrs.title !== undefined) {
      element.title = attrs.title;
    }
    if (attrs.props) {
      Object.assign(element, attrs.props);
    }
    if (attrs.attrs) {
      for (const [name, value] of Object.entries(attrs.attrs)) {
        element.setAttribute(name, value);
      }
    }
    if (attrs.style) {
      Object.assign(element.style, attrs.style);
    }
    if (attrs.on) {
      for (const [name, handler] of Object.entries(attrs.on)) {
        element.addEventListener(name, handler as EventListener);
      }
    }
  }
  append(element, ...children);
  return element;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** Replace all children of `parent`. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.textContent = '';
  append(parent, ...children);
}

/** A `<select>` with these options (value, label); `selected` is kept if present. */
export function select(
  options: [string, string][],
  selected: string,
  onChange: (value: string) => void,
  className = 'jp-Det-select'
): HTMLSelectElement {
  const element = h('select', { class: className, on: { change: () => onChange(element.value) } });
  for (const [value, label] of options) {
    element.appendChild(h('option', { props: { value, selected: value === selected } }, label));
  }
  return element;
}

/** A readable error box; the message is text (it may quote API data). */
export function errorBox(message: string): HTMLElement {
  return h('div', { class: 'jp-Det-error', attrs: { role: 'alert' } }, message);
}

/** A status note (not an error): e.g. the master stopping. Replaces, never stacks. */
export function noteBox(message: string): HTMLElement {
  return h(
    'div',
    { class: 'jp-Det-note jp-Det-masterStopping', attrs: { role: 'status' } },
    message
  );
}

/** The progress bar of an experiment or trial. */
export function progressBar(fraction: number | null | undefined, label: string): HTMLElement {
  const percent =
    typeof fraction === 'number' && Number.isFinite(fraction)
      ? Math.min(1, Math.max(0, fraction))
      : 0;
  return h(
    'div',
    {
      class: 'jp-Det-progress',
      title: label,
      attrs: { role: 'progressbar', 'aria-valuenow': String(Math.round(percent * 100)) }
    },
    h('div', { class: 'jp-Det-progress-fill', style: { width: `${(percent * 100).toFixed(1)}%` } })
  );
}
