/** A kcp logical cluster relsync knows: the platform connection that reaches it, and whether it still binds the export. */
export type LogicalClusterState = 'bound' | 'unbound';

export interface LogicalClusterRecord {
  readonly name: string;
  readonly platform: string;
  readonly state: LogicalClusterState;
}
