package tpcc

import (
	"context"
	"errors"
	"fmt"

	"github.com/shoaldb/shoal/table"
)

// Districts is the number of districts per warehouse (fixed by the spec).
const Districts = 10

// DefaultPrefix starts the name of every table of the workload.
const DefaultPrefix = "tpcc_"

// Table names without the prefix. OrderTable is "order": TPC-C's ORDER (a reserved word in SQL,
// not here).
const (
	WarehouseTable       = "warehouse"
	DistrictTable        = "district"
	CustomerTable        = "customer"
	CustomerByNameTable  = "customer_by_name"
	HistoryTable         = "history"
	NewOrderTable        = "new_order"
	OrderTable           = "order"
	OrderByCustomerTable = "order_by_customer"
	OrderLineTable       = "order_line"
	ItemTable            = "item"
	StockTable           = "stock"
)

type schemaTable struct {
	name    string
	columns string // as table.ParseColumns reads them
	key     string // the primary key, as table.ParseKeyList reads it
}

// schema is TPC-C's tables with the spec's primary keys, and two index tables: customer_by_name
// (c_w_id, c_d_id, c_last, c_first, c_id) for the 60 % of payments and order-statuses that name the
// customer by last name, and order_by_customer (o_w_id, o_d_id, o_c_id, o_id) for order-status's
// "last order of the customer". TPC-C's HISTORY has no primary key; here it is (h_c_w_id, h_c_d_id,
// h_c_id, h_id) with h_id a random 63-bit number.
var schema = []schemaTable{
	{WarehouseTable, "w_id:int64,w_name:string,w_street_1:string,w_street_2:string,w_city:string,w_state:string,w_zip:string,w_tax:float64,w_ytd:float64", "w_id"},
	{DistrictTable, "d_w_id:int64,d_id:int64,d_name:string,d_street_1:string,d_street_2:string,d_city:string,d_state:string,d_zip:string,d_tax:float64,d_ytd:float64,d_next_o_id:int64", "d_w_id,d_id"},
	{CustomerTable, "c_w_id:int64,c_d_id:int64,c_id:int64,c_first:string,c_middle:string,c_last:string,c_street_1:string,c_street_2:string,c_city:string,c_state:string,c_zip:string,c_phone:string,c_since:timestamp,c_credit:string,c_credit_lim:float64,c_discount:float64,c_balance:float64,c_ytd_payment:float64,c_payment_cnt:int64,c_delivery_cnt:int64,c_data:string", "c_w_id,c_d_id,c_id"},
	{CustomerByNameTable, "c_w_id:int64,c_d_id:int64,c_last:string,c_first:string,c_id:int64", "c_w_id,c_d_id,c_last,c_first,c_id"},
	{HistoryTable, "h_c_w_id:int64,h_c_d_id:int64,h_c_id:int64,h_id:int64,h_d_id:int64,h_w_id:int64,h_date:timestamp,h_amount:float64,h_data:string", "h_c_w_id,h_c_d_id,h_c_id,h_id"},
	{NewOrderTable, "no_w_id:int64,no_d_id:int64,no_o_id:int64", "no_w_id,no_d_id,no_o_id"},
	{OrderTable, "o_w_id:int64,o_d_id:int64,o_id:int64,o_c_id:int64,o_entry_d:timestamp,o_carrier_id:int64,o_ol_cnt:int64,o_all_local:int64", "o_w_id,o_d_id,o_id"},
	{OrderByCustomerTable, "o_w_id:int64,o_d_id:int64,o_c_id:int64,o_id:int64", "o_w_id,o_d_id,o_c_id,o_id"},
	{OrderLineTable, "ol_w_id:int64,ol_d_id:int64,ol_o_id:int64,ol_number:int64,ol_i_id:int64,ol_supply_w_id:int64,ol_delivery_d:timestamp,ol_quantity:int64,ol_amount:float64,ol_dist_info:string", "ol_w_id,ol_d_id,ol_o_id,ol_number"},
	{ItemTable, "i_id:int64,i_im_id:int64,i_name:string,i_price:float64,i_data:string", "i_id"},
	{StockTable, "s_w_id:int64,s_i_id:int64,s_quantity:int64,s_dist_01:string,s_dist_02:string,s_dist_03:string,s_dist_04:string,s_dist_05:string,s_dist_06:string,s_dist_07:string,s_dist_08:string,s_dist_09:string,s_dist_10:string,s_ytd:int64,s_order_cnt:int64,s_remote_cnt:int64,s_data:string", "s_w_id,s_i_id"},
}

// Descriptors returns the descriptors (ids unassigned) of the workload's tables, named with prefix.
func Descriptors(prefix string) ([]table.Descriptor, error) {
	out := make([]table.Descriptor, 0, len(schema))
	for _, s := range schema {
		cols, err := table.ParseColumns(s.columns)
		if err != nil {
			return nil, fmt.Errorf("tpcc table %s: %w", s.name, err)
		}
		d := table.NewDescriptor(prefix+s.name, cols, table.ParseKeyList(s.key))
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("tpcc table %s: %w", s.name, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Tables are the workload's open tables.
type Tables struct {
	Warehouse, District, Customer, CustomerByName, History, NewOrder, Order, OrderByCustomer, OrderLine, Item, Stock *table.Table
}

// byName maps the names without prefix to the fields of t.
func (t *Tables) byName() map[string]**table.Table {
	return map[string]**table.Table{
		WarehouseTable: &t.Warehouse, DistrictTable: &t.District, CustomerTable: &t.Customer,
		CustomerByNameTable: &t.CustomerByName, HistoryTable: &t.History, NewOrderTable: &t.NewOrder,
		OrderTable: &t.Order, OrderByCustomerTable: &t.OrderByCustomer, OrderLineTable: &t.OrderLine,
		ItemTable: &t.Item, StockTable: &t.Stock,
	}
}

// ErrTablesExist: CreateTables found a table of the workload already there.
var ErrTablesExist = errors.New("the workload's tables exist already")

// CreateTables creates the workload's tables; none may exist (ErrTablesExist otherwise, nothing
// created).
func CreateTables(ctx context.Context, cat *table.Catalog, prefix string) error {
	ds, err := Descriptors(prefix)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if _, err := cat.Describe(ctx, d.Name); err == nil {
			return fmt.Errorf("table %s: %w: run with --no-load to use them, or drop the %s* tables (shoal table drop NAME)", d.Name, ErrTablesExist, prefix)
		} else if !errors.Is(err, table.ErrNoTable) {
			return err
		}
	}
	for _, d := range ds {
		if _, err := cat.Create(ctx, d); err != nil {
			return fmt.Errorf("creating table %s: %w", d.Name, err)
		}
	}
	return nil
}

// OpenTables opens the workload's tables, which must exist.
func OpenTables(ctx context.Context, cat *table.Catalog, prefix string) (*Tables, error) {
	t := &Tables{}
	for _, s := range schema {
		tb, err := cat.Open(ctx, prefix+s.name)
		if errors.Is(err, table.ErrNoTable) {
			return nil, fmt.Errorf("table %s%s is missing: load the workload first (--load): %w", prefix, s.name, err)
		}
		if err != nil {
			return nil, fmt.Errorf("opening table %s%s: %w", prefix, s.name, err)
		}
		*t.byName()[s.name] = tb
	}
	return t, nil
}
