//go:build tools

// Package tools pins the Prometheus Operator's API types, the source build.sh
// runs controller-gen over (a package the go.mod would otherwise drop).
package tools

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
