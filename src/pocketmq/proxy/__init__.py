"""The RocketMQ 5.x gRPC proxy (apache.rocketmq.v2.MessagingService) in front of brokers."""
