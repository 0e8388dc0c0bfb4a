package templates

import (
	"fmt"

	"helm.sh/helm/v4/pkg/chart/common"
)

// OfflineCapabilities are what a chart sees as .Capabilities without a
// cluster, helm template's: Helm's defaults, with kubeVersion (--kube-version)
// and apiVersions (--api-versions) when given.
func OfflineCapabilities(kubeVersion string, apiVersions []string) (*common.Capabilities, error) {
	caps := common.DefaultCapabilities.Copy()
	if kubeVersion != "" {
		kv, err := common.ParseKubeVersion(kubeVersion)
		if err != nil {
			return nil, fmt.Errorf("--kube-version %q: %w", kubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, apiVersions...)
	return caps, nil
}
