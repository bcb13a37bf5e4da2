/**
 * What the sidebar's cluster strip says about the master's Ray cluster (`cluster` of
 * `GET /resources`): while the cluster is away, the master's own words ("waiting for the Ray
 * cluster at …"); once connected, how many nodes it has.
 */
import type { IClusterStatus } from '../api/types';

export interface IClusterNotice {
  kind: 'warning' | 'info';
  text: string;
}

export function clusterNotice(cluster: IClusterStatus | undefined): IClusterNotice | null {
  if (!cluster) {
    return null; // the local resource manager: nothing to say
  }
  if (cluster.state !== 'connected') {
    return { kind: 'warning', text: `Ray: ${cluster.message}` };
  }
  const alive = cluster.nodes.filter(n => n.alive).length;
  return { kind: 'info', text: `Ray cluster: ${alive} node${alive === 1 ? '' : 's'}` };
}
