// Package deploy holds the tests of lakegate's deployment files: the
// image (Containerfile, make image), the Helm chart (helm/lakegate), the
// compose file and the systemd unit. It is a module of its own so that the
// Kubernetes API types and the compose loader it checks them with never
// reach the server's module. It imports only lakegate's config package, to
// check every setting the files name with the server's own loader.
package deploy
