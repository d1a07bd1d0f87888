//! [`LogEntries`], [`ClientRuns`] and [`DedupeKeys`] over DynamoDB: the Entry, Segment, Clients and Dedupe tables.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, PutRequest, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update, WriteRequest,
};
use tracing::instrument;

use super::{
    DEDUPE_ITEM_CHARGE_BYTES, DynamoLogStore, QuerySpec, SERVICE, batch_write,
    cancellation_reasons, code, conflict_or_error, ddb_error, put_applied, update_applied,
};
use crate::aws::items::{
    Item, bin, client_attr, client_range_from_item, client_range_to_item, dedupe_attr, dedupe_hit,
    entry_attr, entry_from_item, entry_key, entry_to_item, get_num, item_size, num, segment_attr,
    segment_from_item, segment_key, segment_to_item,
};
use crate::domain::clients::{ClientRange, group_key, mark_key};
use crate::domain::cost::{ReadConsistency, read_units, write_units};
use crate::domain::dedupe::{DedupeHit, DedupeKey, DedupeRecord};
use crate::domain::{EntryRecord, LogId, RequestUnits, SegmentRecord, segment_id};
use crate::error::StoreError;
use crate::ports::{
    ClientPutOutcome, ClientRuns, Consistency, DedupeKeys, EntryPage, LogEntries, OnceOutcome,
    PutOutcome, RangePut, TxOutcome, check_range_count,
};

#[async_trait]
impl LogEntries for DynamoLogStore {
    #[instrument(skip(self, segment, first, units), fields(log = %log))]
    async fn create_log(
        &self,
        log: LogId,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.transact(
            vec![
                (
                    self.segment_table.clone(),
                    segment_to_item(log, segment),
                    segment_attr::NUM,
                ),
                (
                    self.entry_table.clone(),
                    entry_to_item(log, first),
                    entry_attr::NUM,
                ),
            ],
            units,
        )
        .await
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn newest_segments(
        &self,
        log: LogId,
        limit: u32,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        let (items, _) = self
            .query_page(
                QuerySpec {
                    table: &self.segment_table,
                    pk_name: segment_attr::LOG_ID,
                    pk: log.as_bytes().to_vec(),
                    from: None,
                    forward: false,
                    limit: Some(limit),
                    consistency,
                },
                None,
                units,
            )
            .await?;
        items.iter().map(segment_from_item).collect()
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn segment(
        &self,
        log: LogId,
        num: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.segment_table)
            .set_key(Some(segment_key(log, num)))
            .consistent_read(consistency == Consistency::Strong)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        let bytes = out.item.as_ref().map(item_size).unwrap_or(0);
        *units += RequestUnits::reads(read_units(bytes, Self::consistency(consistency)));
        out.item.as_ref().map(segment_from_item).transpose()
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn all_segments(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let (items, next) = self
                .query_page(
                    QuerySpec {
                        table: &self.segment_table,
                        pk_name: segment_attr::LOG_ID,
                        pk: log.as_bytes().to_vec(),
                        from: None,
                        forward: true,
                        limit: None,
                        consistency: Consistency::Eventual,
                    },
                    start,
                    units,
                )
                .await?;
            for item in &items {
                out.push(segment_from_item(item)?);
            }
            match next {
                Some(k) => start = Some(k),
                None => return Ok(out),
            }
        }
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn newest_entry(
        &self,
        log: LogId,
        segment: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<EntryRecord>, StoreError> {
        let (items, _) = self
            .query_page(
                QuerySpec {
                    table: &self.entry_table,
                    pk_name: entry_attr::SEGMENT_ID,
                    pk: segment_id(log, segment),
                    from: None,
                    forward: false,
                    limit: Some(1),
                    consistency,
                },
                None,
                units,
            )
            .await?;
        items.first().map(entry_from_item).transpose()
    }
    #[instrument(skip(self, entry, units), fields(log = %log, segment = entry.segment, entry = entry.num))]
    async fn put_entry(
        &self,
        log: LogId,
        entry: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<PutOutcome, StoreError> {
        let item = entry_to_item(log, entry);
        let size = item_size(&item);
        let result = self
            .client
            .put_item()
            .table_name(&self.entry_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#n)")
            .expression_attribute_names("#n", entry_attr::NUM)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => {
                *units += RequestUnits::writes(write_units(size, false));
                Ok(PutOutcome::Written)
            }
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                // A failed conditional write is still charged, at the larger of the two items.
                let old = match e.into_err() {
                    PutItemError::ConditionalCheckFailedException(c) => c.item,
                    _ => None,
                };
                let old_size = old.as_ref().map(item_size).unwrap_or(0);
                *units += RequestUnits::writes(write_units(size.max(old_size), false));
                let winner = old.as_ref().map(entry_from_item).transpose()?;
                Ok(PutOutcome::Taken(winner))
            }
            Err(e) => Err(ddb_error("PutItem", e)),
        }
    }
    #[instrument(skip(self, end, segment, first, units), fields(log = %log, segment = segment.num))]
    async fn start_segment(
        &self,
        log: LogId,
        end: &EntryRecord,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.transact(
            vec![
                (
                    self.entry_table.clone(),
                    entry_to_item(log, end),
                    entry_attr::NUM,
                ),
                (
                    self.segment_table.clone(),
                    segment_to_item(log, segment),
                    segment_attr::NUM,
                ),
                (
                    self.entry_table.clone(),
                    entry_to_item(log, first),
                    entry_attr::NUM,
                ),
            ],
            units,
        )
        .await
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn read_entries(
        &self,
        log: LogId,
        segment: u64,
        from: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<EntryPage, StoreError> {
        let mut entries = Vec::new();
        let mut start = None;
        // DynamoDB returns at most 1 MB per Query; keep following LastEvaluatedKey until we have
        // `limit` entries or the segment ends. Stopping at the first page would silently drop
        // everything past 1 MB.
        loop {
            let remaining = limit.saturating_sub(entries.len());
            if remaining == 0 {
                return Ok(EntryPage {
                    entries,
                    more: true,
                });
            }
            let (items, next) = self
                .query_page(
                    QuerySpec {
                        table: &self.entry_table,
                        pk_name: entry_attr::SEGMENT_ID,
                        pk: segment_id(log, segment),
                        from: Some(from),
                        forward: true,
                        limit: Some(i32::try_from(remaining).unwrap_or(i32::MAX)),
                        consistency,
                    },
                    start,
                    units,
                )
                .await?;
            for item in &items {
                entries.push(entry_from_item(item)?);
            }
            match next {
                Some(k) => start = Some(k),
                None => {
                    return Ok(EntryPage {
                        entries,
                        more: false,
                    });
                }
            }
        }
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn set_snapshot_root(
        &self,
        log: LogId,
        segment: u64,
        n: u64,
        root: &str,
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.entry_table)
            .set_key(Some(entry_key(log, segment, n)))
            .update_expression("SET #r = :r")
            .condition_expression("attribute_exists(#n) AND #t = :snap")
            .expression_attribute_names("#r", entry_attr::ROOT)
            .expression_attribute_names("#n", entry_attr::NUM)
            .expression_attribute_names("#t", entry_attr::TYPE)
            .expression_attribute_values(":r", AttributeValue::S(root.to_owned()))
            .expression_attribute_values(":snap", num(crate::domain::EntryType::SNAPSHOT.0))
            .send()
            .await;
        // An update is billed on the item size; Snapshot entries are far below 1 KB.
        *units += RequestUnits::writes(1.0);
        match result {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Err(StoreError::corrupt(
                    "Entry item",
                    format!("segment {segment} entry {n} is not a Snapshot entry"),
                ))
            }
            Err(e) => Err(ddb_error("UpdateItem", e)),
        }
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn advance_last_snapshot(
        &self,
        log: LogId,
        segment: u64,
        n: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        self.update_segment(
            log,
            segment,
            "SET #s = :v",
            "attribute_exists(#n) AND (attribute_not_exists(#s) OR #s < :v)",
            ("#s", segment_attr::LAST_SNAPSHOT),
            num(n),
            units,
        )
        .await
    }
}

#[async_trait]
impl ClientRuns for DynamoLogStore {
    #[instrument(skip(self, entry, ranges, units), fields(log = %log, ranges = ranges.len()))]
    async fn put_client_entries(
        &self,
        log: LogId,
        entry: &EntryRecord,
        ranges: &[RangePut],
        units: &mut RequestUnits,
    ) -> Result<ClientPutOutcome, StoreError> {
        check_range_count(ranges)?;
        let clients_table = self.clients_table()?;
        let item = entry_to_item(log, entry);
        let entry_size = item_size(&item);
        let put_entry = Put::builder()
            .table_name(&self.entry_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#n)")
            .expression_attribute_names("#n", entry_attr::NUM)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::service(SERVICE, "TransactWriteItems", e))?;
        let mut tx = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_entry).build());
        // Transactions cost two write units per KB per item, whether or not they commit.
        *units += RequestUnits::writes(write_units(entry_size, true));
        // The range items follow the entry (reasons 1..=ranges.len()).
        let mut joining: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for put in ranges {
            let range_item = client_range_to_item(log, &put.range);
            *units += RequestUnits::writes(write_units(item_size(&range_item), true));
            tx = tx.transact_items(Self::tx_put(clients_table, range_item, client_attr::KEY)?);
            if put.join_group {
                joining
                    .entry(put.range.group.as_str())
                    .or_default()
                    .push(put.range.client.clone());
            }
        }
        // One update per group item: a transaction may not touch an item twice.
        for (group, clients) in joining {
            let update = Update::builder()
                .table_name(clients_table)
                .key(client_attr::KEY, bin(group_key(log, group)))
                .key(client_attr::FIRST, num(0))
                .update_expression("ADD #c :c SET #i = :i")
                .expression_attribute_names("#c", client_attr::CLIENTS)
                .expression_attribute_names("#i", client_attr::LOG)
                .expression_attribute_values(":c", AttributeValue::Ss(clients))
                .expression_attribute_values(":i", bin(log.as_bytes().to_vec()))
                .build()
                .map_err(|e| StoreError::service(SERVICE, "TransactWriteItems", e))?;
            tx = tx.transact_items(TransactWriteItem::builder().update(update).build());
            // The group item is small (a few client ids); charged as one KB.
            *units += RequestUnits::writes(write_units(1024, true));
        }
        let Some(reasons) = cancellation_reasons(tx.send().await)? else {
            return Ok(ClientPutOutcome::Written);
        };
        let entry_reason = reasons.first();
        if reasons
            .iter()
            .skip(1)
            .take(ranges.len())
            .any(|r| code(Some(r)) == "ConditionalCheckFailed")
        {
            return Ok(ClientPutOutcome::RangeTaken);
        }
        if code(entry_reason) == "ConditionalCheckFailed" {
            let old = match entry_reason.and_then(|r| r.item.as_ref()) {
                Some(old) => Some(entry_from_item(old)?),
                None => None,
            };
            return Ok(ClientPutOutcome::Taken(old));
        }
        conflict_or_error(&reasons)?;
        Ok(ClientPutOutcome::Interrupted)
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn client_ranges(
        &self,
        log: LogId,
        client: &str,
        at_most: Option<u64>,
        limit: u32,
        units: &mut RequestUnits,
    ) -> Result<Vec<ClientRange>, StoreError> {
        let mut q = self
            .client
            .query()
            .table_name(self.clients_table()?)
            .expression_attribute_names("#k", client_attr::KEY)
            .expression_attribute_values(":k", bin(crate::domain::clients::client_key(log, client)))
            .scan_index_forward(false)
            .consistent_read(true)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX));
        q = match at_most {
            Some(at) => q
                .key_condition_expression("#k = :k AND #m <= :m")
                .expression_attribute_names("#m", client_attr::FIRST)
                .expression_attribute_values(":m", num(at)),
            None => q.key_condition_expression("#k = :k"),
        };
        let out = q.send().await.map_err(|e| ddb_error("Query", e))?;
        let items = out.items.unwrap_or_default();
        let bytes: u64 = items.iter().map(item_size).sum();
        *units += RequestUnits::reads(read_units(bytes, ReadConsistency::Strong));
        items.iter().map(client_range_from_item).collect()
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn group_clients(
        &self,
        log: LogId,
        group: &str,
        units: &mut RequestUnits,
    ) -> Result<Vec<String>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.clients_table()?)
            .key(client_attr::KEY, bin(group_key(log, group)))
            .key(client_attr::FIRST, num(0))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        let size = out.item.as_ref().map(item_size).unwrap_or(0);
        *units += RequestUnits::reads(read_units(size, ReadConsistency::Strong));
        match out.item.as_ref().and_then(|i| i.get(client_attr::CLIENTS)) {
            None => Ok(Vec::new()),
            Some(AttributeValue::Ss(ids)) => Ok(ids.clone()),
            Some(_) => Err(StoreError::corrupt(
                "Clients group item",
                "attribute c is not a string set",
            )),
        }
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn index_mark(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Option<u64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.clients_table()?)
            .key(client_attr::KEY, bin(mark_key(log)))
            .key(client_attr::FIRST, num(0))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        let size = out.item.as_ref().map(item_size).unwrap_or(0);
        *units += RequestUnits::reads(read_units(size, ReadConsistency::Strong));
        out.item
            .as_ref()
            .map(|i| get_num(i, client_attr::MARK, "Clients index mark"))
            .transpose()
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn start_index_mark(
        &self,
        log: LogId,
        at: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        let mut item = Item::new();
        item.insert(client_attr::KEY.into(), bin(mark_key(log)));
        item.insert(client_attr::FIRST.into(), num(0));
        item.insert(client_attr::MARK.into(), num(at));
        item.insert(client_attr::LOG.into(), bin(log.as_bytes().to_vec()));
        *units += RequestUnits::writes(write_units(item_size(&item), false));
        let result = self
            .client
            .put_item()
            .table_name(self.clients_table()?)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", client_attr::KEY)
            .send()
            .await;
        put_applied(result)
    }
    #[instrument(skip(self, units), fields(log = %log))]
    async fn advance_index_mark(
        &self,
        log: LogId,
        to: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        // The mark item is a key and one number: one write unit.
        *units += RequestUnits::writes(1.0);
        let result = self
            .client
            .update_item()
            .table_name(self.clients_table()?)
            .key(client_attr::KEY, bin(mark_key(log)))
            .key(client_attr::FIRST, num(0))
            .update_expression("SET #w = :w")
            .condition_expression("#w < :w")
            .expression_attribute_names("#w", client_attr::MARK)
            .expression_attribute_values(":w", num(to))
            .send()
            .await;
        update_applied(result)
    }
    #[instrument(skip(self, clients, units), fields(log = %log, clients = clients.len()))]
    async fn add_to_group(
        &self,
        log: LogId,
        group: &str,
        clients: &[String],
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        if clients.is_empty() {
            return Ok(());
        }
        // Billed at the larger of the item before and after; a group item is a few client ids.
        let bytes: usize = clients.iter().map(|c| c.len() + 1).sum::<usize>() + group.len() + 40;
        *units += RequestUnits::writes(write_units(bytes as u64, false));
        self.client
            .update_item()
            .table_name(self.clients_table()?)
            .key(client_attr::KEY, bin(group_key(log, group)))
            .key(client_attr::FIRST, num(0))
            .update_expression("ADD #c :c SET #i = :i")
            .expression_attribute_names("#c", client_attr::CLIENTS)
            .expression_attribute_names("#i", client_attr::LOG)
            .expression_attribute_values(":c", AttributeValue::Ss(clients.to_vec()))
            .expression_attribute_values(":i", bin(log.as_bytes().to_vec()))
            .send()
            .await
            .map_err(|e| ddb_error("UpdateItem", e))?;
        Ok(())
    }
    #[instrument(skip(self, ranges, units), fields(log = %log, ranges = ranges.len()))]
    async fn put_deferred_ranges(
        &self,
        log: LogId,
        ranges: &[ClientRange],
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        let mut requests = Vec::with_capacity(ranges.len());
        for r in ranges {
            let item = client_range_to_item(log, r);
            *units += RequestUnits::writes(write_units(item_size(&item), false));
            let put = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(|e| StoreError::service(SERVICE, "BatchWriteItem", e))?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        batch_write(
            &self.client,
            self.clients_table()?,
            requests,
            std::time::Duration::from_millis(20),
        )
        .await
    }
}

#[async_trait]
impl DedupeKeys for DynamoLogStore {
    #[instrument(skip(self, entry, key, units), fields(log = %log, seq))]
    async fn put_entry_once(
        &self,
        log: LogId,
        entry: &EntryRecord,
        seq: u64,
        key: &DedupeRecord,
        units: &mut RequestUnits,
    ) -> Result<OnceOutcome, StoreError> {
        let dedupe_table = self.dedupe_table()?;
        let mut item = entry_to_item(log, entry);
        if let Some(r) = key.entry_ref() {
            item.insert(entry_attr::DEDUPE.into(), bin(r.encode()));
        }
        let entry_size = item_size(&item);
        let put = Put::builder()
            .table_name(&self.entry_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#n)")
            .expression_attribute_names("#n", entry_attr::NUM)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::service(SERVICE, "TransactWriteItems", e))?;
        let cols = &key.columns;
        let condition = (0..cols.checked.len())
            .map(|i| format!("NOT contains(#c{i}, :s)"))
            .collect::<Vec<_>>()
            .join(" AND ");
        let mut update_expr = "ADD #add :v".to_string();
        if !cols.removed.is_empty() {
            let names: Vec<String> = (0..cols.removed.len()).map(|i| format!("#r{i}")).collect();
            update_expr.push_str(" REMOVE ");
            update_expr.push_str(&names.join(", "));
        }
        let [bare, value] = key.elements(seq);
        let mut update = Update::builder()
            .table_name(dedupe_table)
            .key(dedupe_attr::PREFIX, bin(key.key.prefix.clone()))
            .update_expression(update_expr)
            .condition_expression(condition)
            .expression_attribute_names("#add", &cols.current)
            .expression_attribute_values(":s", bin(bare.clone()))
            .expression_attribute_values(":v", AttributeValue::Bs(vec![bare.into(), value.into()]))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (i, c) in cols.checked.iter().enumerate() {
            update = update.expression_attribute_names(format!("#c{i}"), c);
        }
        for (i, c) in cols.removed.iter().enumerate() {
            update = update.expression_attribute_names(format!("#r{i}"), c);
        }
        let update = update
            .build()
            .map_err(|e| StoreError::service(SERVICE, "TransactWriteItems", e))?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().update(update).build())
            .send()
            .await;
        // Transactions cost two write units per KB per item, whether or not they commit.
        let charge = |units: &mut RequestUnits, dedupe_bytes: u64| {
            *units += RequestUnits::writes(write_units(entry_size, true));
            *units += RequestUnits::writes(write_units(dedupe_bytes, true));
        };
        let Some(reasons) = cancellation_reasons(result)? else {
            charge(units, DEDUPE_ITEM_CHARGE_BYTES);
            return Ok(OnceOutcome::Written);
        };
        let (entry_reason, dedupe_reason) = (reasons.first(), reasons.get(1));
        let old_dedupe = dedupe_reason.and_then(|r| r.item.as_ref());
        charge(
            units,
            old_dedupe
                .map(item_size)
                .unwrap_or(DEDUPE_ITEM_CHARGE_BYTES),
        );
        let taken = match entry_reason.and_then(|r| r.item.as_ref()) {
            Some(old) if code(entry_reason) == "ConditionalCheckFailed" => {
                Some(entry_from_item(old)?)
            }
            _ => None,
        };
        if code(dedupe_reason) == "ConditionalCheckFailed" {
            let hit = old_dedupe
                .and_then(|item| dedupe_hit(item, &key.key.suffix, &cols.checked))
                .ok_or_else(|| {
                    StoreError::corrupt(
                        "Dedupe item",
                        "the key's condition failed but the item returned does not hold it",
                    )
                })?;
            return Ok(OnceOutcome::Duplicate(hit, taken));
        }
        if code(entry_reason) == "ConditionalCheckFailed" {
            return Ok(OnceOutcome::Taken(taken));
        }
        conflict_or_error(&reasons)?;
        Ok(OnceOutcome::Interrupted)
    }
    #[instrument(skip(self, key, units))]
    async fn find_key(
        &self,
        key: &DedupeKey,
        columns: &[String],
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<DedupeHit>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.dedupe_table()?)
            .key(dedupe_attr::PREFIX, bin(key.prefix.clone()))
            .consistent_read(consistency == Consistency::Strong)
            .send()
            .await
            .map_err(|e| ddb_error("GetItem", e))?;
        let size = out.item.as_ref().map(item_size).unwrap_or(0);
        *units += RequestUnits::reads(read_units(size, Self::consistency(consistency)));
        Ok(out
            .item
            .as_ref()
            .and_then(|item| dedupe_hit(item, &key.suffix, columns)))
    }
}
