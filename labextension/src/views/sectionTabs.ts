/**
 * A tab strip over sections of which one shows at a time (the experiment view's Trials,
 * Learning curves, … tabs).
 */
import { h } from '../dom';

export class SectionTabs<S extends string> {
  /** The tab buttons (role `tablist`). */
  readonly tabs = h('div', { class: 'jp-Det-tabs', attrs: { role: 'tablist' } });
  /** The sections' elements, one shown. */
  readonly sections = h('div', { class: 'jp-Det-sections' });
  private _nodes = new Map<S, HTMLElement>();
  private _buttons = new Map<S, HTMLButtonElement>();
  private _current: S;

  /** `list`: each section and its tab's label, the first shown; `onPick`: a tab was clicked. */
  constructor(list: [S, string][], onPick: (section: S) => void) {
    this._current = list[0][0];
    for (const [section, label] of list) {
      const button = h(
        'button',
        {
          class: 'jp-Det-tab',
          attrs: { role: 'tab', 'data-section': section },
          on: { click: () => onPick(section) }
        },
        label
      );
      this._buttons.set(section, button);
      this.tabs.appendChild(button);
      const node = h('div', {
        class: `jp-Det-section jp-Det-section-${section}`,
        attrs: { 'data-section': section }
      });
      this._nodes.set(section, node);
      this.sections.appendChild(node);
    }
  }

  get current(): S {
    return this._current;
  }

  /** The element of one section. */
  node(section: S): HTMLElement {
    return this._nodes.get(section)!;
  }

  /** Show one section and mark its tab current. */
  show(section: S): void {
    this._current = section;
    for (const [name, node] of this._nodes) {
      node.hidden = name !== section;
      this._buttons.get(name)?.classList.toggle('jp-mod-current', name === section);
      this._buttons.get(name)?.setAttribute('aria-selected', String(name === section));
    }
  }
}
