package lualockotel_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/extra/lualockotel"
)

// Example wires lualock's metrics to a meter provider. Here a ManualReader
// stands for the exporter of a real setup (OTLP, Prometheus).
func Example() {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(ctx)

	otl, err := lualockotel.New(lualockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	client, err := lualock.New(rdb, lualock.Options{Observer: otl.Observer()})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	reg, err := otl.RegisterStats(client) // the gauges of client.Stats()
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	lock := client.NewLock("reports:daily")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	// ... the job ...
}
