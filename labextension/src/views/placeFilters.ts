/**
 * The sidebar's "whose" and "where" filters: a user dropdown and a workspace dropdown, their
 * choices taken from the listed experiments (docs/team.md). Each shows only when there is a
 * choice to make (experiments of two users, or in two workspaces), so one person's master
 * keeps its uncluttered bar.
 */
import { h, replaceChildren } from '../dom';
import { ownerChoices, workspaceChoices } from '../model/experimentTable';
import type { IExperiment } from '../api/types';

export interface IPlaceFilter {
  owner: string;
  workspace: string;
}

/** One dropdown whose options follow the data; the chosen value stays while it exists. */
class ChoiceSelect {
  readonly node: HTMLSelectElement;
  private _shown: string[] = [];

  constructor(
    className: string,
    private readonly _allLabel: string,
    title: string,
    onChange: (value: string) => void
  ) {
    this.node = h('select', {
      class: `jp-Det-select ${className}`,
      title,
      attrs: { 'aria-label': title },
      on: { change: () => onChange(this.node.value) }
    });
    this.node.hidden = true;
  }

  get value(): string {
    return this.node.value;
  }

  /** Show these choices (plus the chosen one, kept even when no experiment has it now). */
  update(values: string[]): void {
    const chosen = this.node.value;
    const wanted = chosen && !values.includes(chosen) ? [...values, chosen] : values;
    this.node.hidden = wanted.length < 2 && !chosen;
    if (wanted.join('\n') === this._shown.join('\n')) {
      return;
    }
    this._shown = wanted;
    replaceChildren(
      this.node,
      h('option', { props: { value: '' } }, this._allLabel),
      ...wanted.map(value => h('option', { props: { value, selected: value === chosen } }, value))
    );
    this.node.value = chosen;
  }
}

/** The user and workspace dropdowns of the sidebar's filter bar. */
export class PlaceFilters {
  readonly owner: ChoiceSelect;
  readonly workspace: ChoiceSelect;
  readonly nodes: HTMLElement[];

  constructor(onChange: (filter: IPlaceFilter) => void) {
    const changed = (): void =>
      onChange({ owner: this.owner.value, workspace: this.workspace.value });
    this.owner = new ChoiceSelect(
      'jp-Det-ownerFilter',
      'All users',
      'Only the experiments of this user',
      changed
    );
    this.workspace = new ChoiceSelect(
      'jp-Det-workspaceFilter',
      'All workspaces',
      'Only the experiments in this workspace',
      changed
    );
    this.nodes = [this.owner.node, this.workspace.node];
  }

  /** Refresh the choices from every listed experiment (not only the filtered ones). */
  update(experiments: IExperiment[]): void {
    this.owner.update(ownerChoices(experiments));
    this.workspace.update(workspaceChoices(experiments));
  }
}
