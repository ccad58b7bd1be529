//go:build tools

package tools

import _ "knative.dev/eventing/cmd/apiserver_receive_adapter"
