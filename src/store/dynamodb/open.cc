// outbox::OpenDynamoDbStore (include/outbox/dynamodb.h): the public options
// mapped onto the AWS client and DynamoDbStore.
#include "aws/config.h"
#include "aws/json_client.h"
#include "fmt/format.h"
#include "outbox/dynamodb.h"
#include "store/dynamodb/dynamodb_store.h"

namespace outbox {

absl::StatusOr<std::unique_ptr<Store>> OpenDynamoDbStore(DynamoDbOptions options) {
  if (options.active_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("dynamodb.active_timeout: must be positive");
  }
  auto c = aws::ClientOptionsFor(aws::SettingsOf(options), "dynamodb", "DYNAMODB", "dynamodb");
  if (!c.ok()) return c.status();
  DynamoDbStoreOptions so;
  so.client = *std::move(c);
  so.active_timeout = options.active_timeout;
  auto store = DynamoDbStore::Open(std::move(so));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(*std::move(store));
}

}  // namespace outbox
