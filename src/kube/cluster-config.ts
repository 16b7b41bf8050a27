/** How to reach one cluster: what the config says of it, as the connection layer reads it. */
export interface ClusterConfig {
  readonly name: string;
  /** Absolute path; undefined means in-cluster config. */
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  /** A kcp platform, reached through an APIExport's virtual workspace; see kube/kcp-endpoint.ts. */
  readonly kcp?: { readonly endpointSlice: string | undefined; readonly url: string | undefined } | undefined;
}
