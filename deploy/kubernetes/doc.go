// Package kubernetes holds weir's Kubernetes manifests (a Kustomize base
// under base/) and the test that builds them with Kustomize, decodes every
// object strictly into Kubernetes' API types and checks their wiring
// against what weir reads: flags, options, ports, probes, secrets.
package kubernetes
