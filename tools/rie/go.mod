// AWS's Lambda Runtime Interface Emulator (aws-lambda-rie), which the Lambda tests (test/lambda/)
// and the bench's rie scenario run the packaged functions under. Nothing here is cirrus code: the
// tool directive below names upstream's main package at the pinned commit (no tagged release is
// served by the module proxy). To bump: go get -tool <package>@<version>, then go mod tidy.
// assets.ts builds it once per machine into a cache keyed by this file and go.sum.

module github.com/cirrus-ccm/cirrus/tools/rie

go 1.26.6

tool github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

require (
	github.com/aws/aws-lambda-runtime-interface-emulator v0.0.0-20261030222936-bef5c4ba774d // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/go-chi/chi v1.5.5 // indirect
	github.com/go-chi/chi/v5 v5.4.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jessevdk/go-flags v1.5.0 // indirect
	github.com/orcaman/concurrent-map v1.0.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v5 v5.3.1 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/stretchr/objx v0.5.2 // indirect
	github.com/stretchr/testify v1.9.0 // indirect
	golang.org/x/sys v0.14.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
