package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/cluster"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/server"
)

// A replica of a cluster (cluster_dsn): it registers first (its prefix
// begins the ids of its sessions and transfers), shares the MCP switch
// and its place with the server, advertises its address once listening,
// and leaves the cluster last.

// joinCluster registers this replica in the cluster of cfg.ClusterDSN,
// signing its block reads for the others with cfg.ClusterSecret; nil
// peers without one. leave removes it.
func joinCluster(ctx context.Context, cfg config.Config, log *slog.Logger) (peers *cluster.Peers, leave func(), err error) {
	if cfg.ClusterDSN == "" {
		return nil, func() {}, nil
	}
	if peers, err = cluster.OpenPeers(ctx, cfg.ClusterDSN, []byte(cfg.ClusterSecret), log); err != nil {
		return nil, nil, err
	}
	return peers, func() {
		if err := peers.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("leave the cluster", lakegate.LogError, err.Error())
		}
	}, nil
}

// shareCluster gives the server its place in the cluster and the shared
// MCP switch, whose recorded state wins over mcp_enabled and whose every
// change reaches every replica. closeSwitch stops following it: after the
// server, before the plugin it switches.
func shareCluster(ctx context.Context, cfg config.Config, peers *cluster.Peers, plugin *mcp.Plugin, sopts *server.Options,
	log *slog.Logger) (closeSwitch func(), err error) {
	if peers == nil {
		return func() {}, nil
	}
	sopts.Replicas = peers
	sw, err := cluster.Open(ctx, cfg.ClusterDSN, cfg.MCPEnabled, func(on bool) {
		if on {
			plugin.Enable()
		} else {
			plugin.Disable()
		}
	}, log)
	if err != nil {
		return nil, err
	}
	sopts.Switch = sw
	return func() { _ = sw.Close(context.WithoutCancel(ctx)) }, nil
}

// advertise records the URL the other replicas reach this one at:
// cluster_advertise_url, or the listener's base URL when it names an
// address.
func advertise(ctx context.Context, cfg config.Config, peers *cluster.Peers, ln net.Listener, base string) error {
	if peers == nil {
		return nil
	}
	url := cfg.ClusterAdvertiseURL
	if url == "" {
		if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
			return fmt.Errorf("cluster: listening on %s, the other replicas need an address: set cluster_advertise_url", ln.Addr())
		}
		url = base
	}
	return peers.Advertise(ctx, url)
}
